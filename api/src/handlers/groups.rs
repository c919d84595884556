//! Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups.
//!
//! Each handler finds the shard that coordinates the group (the owner of the group's
//! `__consumer_offsets` partition), makes the API's own call there (`group::calls`, over the
//! mesh when it is another shard), and builds the response for the request's version from the
//! call's typed reply. FindCoordinator creates `__consumer_offsets` on first use, as Kafka
//! does. The KIP-848 APIs are in `consumer_groups.rs`.

use std::rc::Rc;

use bytes::Bytes;

use wire::generated::delete_groups_response::DeletableGroupResult;
use wire::generated::describe_groups_response::DescribedGroup;
use wire::generated::find_coordinator_response::Coordinator as CoordinatorEntry;
use wire::generated::join_group_response::JoinGroupResponseMember;
use wire::generated::leave_group_response::MemberResponse;
use wire::generated::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use wire::generated::*;
use wire::ErrorCode;

use acl::AclOperation::{Delete, Describe, Read};
use acl::ResourceType::{Group, TransactionalId};

use super::{encode_response, group_acls, RequestContext, Response};
use crate::forward::Serve;
use crate::group::calls::{self, JoinFailed, JoinReply, MemberLeft, SyncReply};
use crate::group::classic::JoinArgs;
use crate::group::{self, FetchedTopic, OFFSETS_TOPIC};
use crate::shard::Shard;

/// FindCoordinator key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Makes the call `make(partition)` on the coordinator of `group_id` and returns its reply;
/// `Err` is the error every part of the answer gets (no coordinator yet).
pub(super) async fn call<C: Serve<Shard>>(
    shard: &Rc<Shard>,
    group_id: &str,
    make: impl FnOnce(i32) -> C,
) -> Result<C::Reply, ErrorCode> {
    let (target, partition) = group::locate_when_known(shard, group_id).await?;
    Ok(shard.call(target, make(partition)).await)
}

/// Creates `__consumer_offsets` if it does not exist (compacted, `offsets.topic.*`).
async fn ensure_offsets_topic(shard: &Rc<Shard>) -> Result<(), ErrorCode> {
    let config = &shard.config.groups;
    super::internal_topics::ensure(
        shard,
        OFFSETS_TOPIC,
        config.offsets_topic_num_partitions,
        config.offsets_topic_segment_bytes,
    )
    .await
}

pub async fn find_coordinator(
    shard: Rc<Shard>,
    request: FindCoordinatorRequest,
    ctx: RequestContext,
) -> Response {
    let keys: Vec<String> = if ctx.api_version >= 4 {
        request.coordinator_keys.clone()
    } else {
        vec![request.key.clone()]
    };
    let key_type = if ctx.api_version >= 1 {
        request.key_type
    } else {
        KEY_TYPE_GROUP
    };
    let advertised = shard.config.advertised_for(&ctx.listener);
    let (host, port) = (advertised.host.clone(), i32::from(advertised.port));
    let node_id = shard.config.node_id;
    let outcome = if key_type == KEY_TYPE_TRANSACTION {
        match super::transactions::ensure_txn_topic(&shard).await {
            Ok(()) => Ok(()),
            Err(code) => Err((code, "the transaction coordinator is not available")),
        }
    } else if key_type != KEY_TYPE_GROUP {
        Err((ErrorCode::InvalidRequest, "unknown coordinator key type"))
    } else {
        match ensure_offsets_topic(&shard).await {
            Ok(()) => Ok(()),
            Err(code) => Err((code, "the group coordinator is not available")),
        }
    };
    // In a cluster the coordinator is the leader of the group's `__consumer_offsets`
    // partition, wherever it is.
    let brokers = shard
        .cluster
        .is_some()
        .then(|| super::cluster_view::brokers(&shard, &ctx.listener));
    let image = shard.image();
    let coordinator_of = |key: &str| -> Option<(i32, String, i32)> {
        let Some(brokers) = &brokers else {
            return Some((node_id, host.clone(), port));
        };
        let leader = if key_type == KEY_TYPE_TRANSACTION {
            super::transactions::coordinator_partition(&shard, key)?
        } else {
            let topic = image.topic(OFFSETS_TOPIC)?;
            let partition = crate::group::partition_for(key, topic.partitions.len() as i32);
            topic.partition(partition)?.leader
        };
        brokers
            .iter()
            .find(|b| b.node_id == leader)
            .map(|b| (b.node_id, b.host.clone(), b.port))
    };
    // Kafka: DESCRIBE on the group or the transactional id, per key, before anything else.
    let refusal = |key: &str| match key_type {
        KEY_TYPE_GROUP if !shard.authorize(&ctx, Describe, Group, key) => {
            Some(ErrorCode::GroupAuthorizationFailed)
        }
        KEY_TYPE_TRANSACTION if !shard.authorize(&ctx, Describe, TransactionalId, key) => {
            Some(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        _ => None,
    };
    let entry = |key: String| match (refusal(&key), &outcome, coordinator_of(&key)) {
        (Some(code), _, _) => CoordinatorEntry {
            key,
            node_id: -1,
            host: String::new(),
            port: -1,
            error_code: code.code(),
            error_message: Some(code.message().into()),
            ..Default::default()
        },
        (None, outcome, coordinator) => match (outcome, coordinator) {
            (Ok(()), Some((node_id, host, port))) => CoordinatorEntry {
                key,
                node_id,
                host,
                port,
                error_code: 0,
                error_message: None,
                ..Default::default()
            },
            (Ok(()), None) => CoordinatorEntry {
                key,
                node_id: -1,
                host: String::new(),
                port: -1,
                error_code: ErrorCode::CoordinatorNotAvailable.code(),
                error_message: Some("the group's coordinator has no live leader".into()),
                ..Default::default()
            },
            (Err((code, message)), _) => CoordinatorEntry {
                key,
                node_id: -1,
                host: String::new(),
                port: -1,
                error_code: code.code(),
                error_message: Some((*message).into()),
                ..Default::default()
            },
        },
    };
    let response = if ctx.api_version >= 4 {
        FindCoordinatorResponse {
            coordinators: keys.into_iter().map(entry).collect(),
            ..Default::default()
        }
    } else {
        let e = entry(keys.into_iter().next().unwrap_or_default());
        FindCoordinatorResponse {
            error_code: e.error_code,
            error_message: if ctx.api_version >= 1 {
                e.error_message
            } else {
                None
            },
            node_id: e.node_id,
            host: e.host,
            port: e.port,
            ..Default::default()
        }
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub(super) fn invalid_group_id(group_id: &str) -> bool {
    group_id.is_empty()
}

/// JoinGroup's answer (before the per-version adjustments).
fn join_response(reply: JoinReply) -> JoinGroupResponse {
    match reply {
        Ok(joined) => JoinGroupResponse {
            error_code: 0,
            generation_id: joined.generation_id,
            protocol_type: joined.protocol_type,
            protocol_name: joined.protocol_name,
            leader: joined.leader,
            skip_assignment: joined.skip_assignment,
            member_id: joined.member_id,
            members: joined
                .members
                .into_iter()
                .map(|m| JoinGroupResponseMember {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    metadata: m.metadata,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        Err(failed) => JoinGroupResponse {
            error_code: failed.code.code(),
            generation_id: -1,
            member_id: failed.member_id,
            protocol_name: failed.protocol_name,
            ..Default::default()
        },
    }
}

/// Kafka's `JoinGroupResponse` constructor: before v7 the protocol name cannot be null (`""`
/// instead); from v7 an empty one is sent as null (so every error answer has null).
fn versioned_protocol_name(response: &mut JoinGroupResponse, version: i16) {
    if version < 7 && response.protocol_name.is_none() {
        response.protocol_name = Some(String::new());
    }
    if version >= 7 && response.protocol_name.as_deref() == Some("") {
        response.protocol_name = None;
    }
}

pub async fn join_group(
    shard: Rc<Shard>,
    request: JoinGroupRequest,
    ctx: RequestContext,
    client_host: String,
) -> Response {
    let version = ctx.api_version;
    let limits = &shard.config.groups;
    let error = |code: ErrorCode| Err(JoinFailed::new(&request.member_id, code));
    let reply = if !shard.authorize(&ctx, Read, Group, &request.group_id) {
        // Kafka's error response names no member.
        Err(JoinFailed::new("", ErrorCode::GroupAuthorizationFailed))
    } else if invalid_group_id(&request.group_id) {
        error(ErrorCode::InvalidGroupId)
    } else if request.session_timeout_ms < limits.min_session_timeout_ms
        || request.session_timeout_ms > limits.max_session_timeout_ms
    {
        error(ErrorCode::InvalidSessionTimeout)
    } else {
        let args = JoinArgs {
            member_id: request.member_id.clone(),
            group_instance_id: request.group_instance_id.clone(),
            client_id: ctx.client_id.clone(),
            client_host,
            session_timeout_ms: request.session_timeout_ms,
            // v0 has no rebalance timeout: Kafka uses the session timeout.
            rebalance_timeout_ms: if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            },
            protocol_type: request.protocol_type.clone(),
            protocols: request
                .protocols
                .iter()
                // Copied: a slice would keep the whole connection read buffer it came
                // from (64 KiB) alive as long as the member stays in its group.
                .map(|p| (p.name.clone(), Bytes::copy_from_slice(&p.metadata)))
                .collect(),
            require_known_member_id: version >= 4,
        };
        let join = |partition| calls::JoinGroup {
            partition,
            group_id: request.group_id.clone(),
            args,
        };
        call(&shard, &request.group_id, join)
            .await
            .unwrap_or_else(error)
    };
    let mut response = join_response(reply);
    versioned_protocol_name(&mut response, version);
    if version < 7 {
        response.protocol_type = None;
    }
    if version < 9 {
        response.skip_assignment = false;
    }
    if version < 5 {
        for member in &mut response.members {
            member.group_instance_id = None;
        }
    }
    encode_response(&ctx, version, &response)
}

/// SyncGroup's answer (before the per-version adjustments).
fn sync_response(reply: SyncReply) -> SyncGroupResponse {
    match reply {
        Ok(synced) => SyncGroupResponse {
            error_code: 0,
            protocol_type: synced.protocol_type,
            protocol_name: synced.protocol_name,
            assignment: synced.assignment,
            ..Default::default()
        },
        Err(code) => SyncGroupResponse {
            error_code: code.code(),
            ..Default::default()
        },
    }
}

/// Kafka's first check of a SyncGroup (`areMandatoryProtocolTypeAndNamePresent`): from v5
/// the protocol type and name are mandatory, or the request is INCONSISTENT_GROUP_PROTOCOL
/// before its group is authorized or looked up.
fn sync_protocol_missing(version: i16, request: &SyncGroupRequest) -> bool {
    version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none())
}

pub async fn sync_group(
    shard: Rc<Shard>,
    request: SyncGroupRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let reply = if sync_protocol_missing(version, &request) {
        Err(ErrorCode::InconsistentGroupProtocol)
    } else if !shard.authorize(&ctx, Read, Group, &request.group_id) {
        Err(ErrorCode::GroupAuthorizationFailed)
    } else if invalid_group_id(&request.group_id) {
        Err(ErrorCode::InvalidGroupId)
    } else {
        let sync = |partition| calls::SyncGroup {
            partition,
            group_id: request.group_id.clone(),
            member_id: request.member_id.clone(),
            group_instance_id: request.group_instance_id.clone(),
            generation_id: request.generation_id,
            protocol_type: request.protocol_type.clone(),
            protocol_name: request.protocol_name.clone(),
            assignments: request
                .assignments
                .iter()
                .map(|a| (a.member_id.clone(), Bytes::copy_from_slice(&a.assignment)))
                .collect(),
        };
        call(&shard, &request.group_id, sync).await.and_then(|r| r)
    };
    let mut response = sync_response(reply);
    if version < 5 {
        response.protocol_type = None;
        response.protocol_name = None;
    }
    encode_response(&ctx, version, &response)
}

/// 0 for `Ok`, else the error's code.
fn code_of(result: Result<(), ErrorCode>) -> i16 {
    result.err().map_or(0, ErrorCode::code)
}

pub async fn heartbeat(
    shard: Rc<Shard>,
    request: HeartbeatRequest,
    ctx: RequestContext,
) -> Response {
    let result = if !shard.authorize(&ctx, Read, Group, &request.group_id) {
        Err(ErrorCode::GroupAuthorizationFailed)
    } else if invalid_group_id(&request.group_id) {
        Err(ErrorCode::InvalidGroupId)
    } else {
        let beat = |partition| calls::Heartbeat {
            partition,
            group_id: request.group_id.clone(),
            member_id: request.member_id.clone(),
            group_instance_id: request.group_instance_id.clone(),
            generation_id: request.generation_id,
        };
        call(&shard, &request.group_id, beat).await.and_then(|r| r)
    };
    let response = HeartbeatResponse {
        error_code: code_of(result),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// The members a LeaveGroup names: v0-2 one, at the top level; v3+ its list, which may be
/// empty (Kafka's `LeaveGroupRequest.members()`: then no member is answered).
fn leaving_members(
    version: i16,
    member_id: String,
    members: Vec<wire::generated::leave_group_request::MemberIdentity>,
) -> Vec<(String, Option<String>)> {
    if version < 3 {
        return vec![(member_id, None)];
    }
    members
        .into_iter()
        .map(|m| (m.member_id, m.group_instance_id))
        .collect()
}

pub async fn leave_group(
    shard: Rc<Shard>,
    request: LeaveGroupRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let group_id = request.group_id;
    let reply = if !shard.authorize(&ctx, Read, Group, &group_id) {
        Err(ErrorCode::GroupAuthorizationFailed)
    } else if invalid_group_id(&group_id) {
        Err(ErrorCode::InvalidGroupId)
    } else {
        let members = leaving_members(version, request.member_id, request.members);
        let leave = |partition| calls::LeaveGroup {
            partition,
            group_id: group_id.clone(),
            members,
        };
        call(&shard, &group_id, leave).await.and_then(|r| r)
    };
    let (error_code, mut members) = match reply {
        Ok(left) => {
            let members = left
                .into_iter()
                .map(|m: MemberLeft| MemberResponse {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error_code: code_of(m.result),
                    ..Default::default()
                })
                .collect();
            (0, members)
        }
        Err(code) => (code.code(), Vec::new()),
    };
    // v0-2 name one member and carry its result at the top level.
    let error_code = if version < 3 {
        members.first().map_or(error_code, |m| {
            if error_code != 0 {
                error_code
            } else {
                m.error_code
            }
        })
    } else {
        error_code
    };
    if version < 3 {
        members.clear();
    }
    let response = LeaveGroupResponse {
        error_code,
        members,
        ..Default::default()
    };
    encode_response(&ctx, version, &response)
}

pub async fn offset_commit(
    shard: Rc<Shard>,
    request: OffsetCommitRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let everywhere = |request: &OffsetCommitRequest, code: ErrorCode| {
        group::offset_commit_response(request, &|_, _| code)
    };
    // Kafka: READ on the group, else every partition is refused; then READ on each topic.
    let mut request = request;
    let mut refused = Vec::new();
    let response = if !shard.authorize(&ctx, Read, Group, &request.group_id) {
        everywhere(&request, ErrorCode::GroupAuthorizationFailed)
    } else if invalid_group_id(&request.group_id) {
        everywhere(&request, ErrorCode::InvalidGroupId)
    } else {
        let had_topics = !request.topics.is_empty();
        refused = group_acls::split_commit(&shard, &ctx, &mut request.topics);
        // Located first: the request travels to the coordinator, and a failure to find one
        // answers it here.
        match group::locate_when_known(&shard, &request.group_id).await {
            // Nothing left to commit: Kafka answers without the coordinator.
            _ if had_topics && request.topics.is_empty() => OffsetCommitResponse::default(),
            Err(code) => everywhere(&request, code),
            Ok((target, partition)) => {
                let commit = calls::OffsetCommit {
                    partition,
                    request,
                    version,
                };
                shard.call(target, commit).await
            }
        }
    };
    let mut response = response;
    response.topics.extend(refused);
    encode_response(&ctx, version, &response)
}

async fn fetch_group_offsets(
    shard: &Rc<Shard>,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member: (Option<String>, i32),
    require_stable: bool,
) -> (i16, Vec<FetchedTopic>) {
    let requested = topics.clone();
    let fetch = |partition| calls::OffsetFetch {
        partition,
        group_id: group_id.to_string(),
        topics,
        member_id: member.0,
        member_epoch: member.1,
        require_stable,
    };
    match call(shard, group_id, fetch).await {
        Ok(Ok(topics)) => (0, topics),
        Ok(Err(code)) => (code.code(), Vec::new()),
        Err(code) => {
            // Every requested partition carries the error too (v0-1 have no top-level code).
            let topics = requested
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| {
                    let parts = partitions
                        .into_iter()
                        .map(|p| (p, -1, -1, Some(String::new()), code.code()))
                        .collect();
                    (name, parts)
                })
                .collect();
            (code.code(), topics)
        }
    }
}

/// `fetch_group_offsets` as Kafka authorizes it: DESCRIBE on the group (refused: every
/// requested partition and the group carry GROUP_AUTHORIZATION_FAILED), then DESCRIBE on
/// each topic (named ones refused with TOPIC_AUTHORIZATION_FAILED, left out of "all").
async fn fetch_authorized_offsets(
    shard: &Rc<Shard>,
    ctx: &RequestContext,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member: (Option<String>, i32),
    require_stable: bool,
) -> (i16, Vec<FetchedTopic>) {
    if !shard.authorize(ctx, Describe, Group, group_id) {
        let code = ErrorCode::GroupAuthorizationFailed.code();
        let topics = topics
            .unwrap_or_default()
            .into_iter()
            .map(|(name, partitions)| {
                let parts = partitions
                    .into_iter()
                    .map(|p| (p, -1, -1, Some(String::new()), code))
                    .collect();
                (name, parts)
            })
            .collect();
        return (code, topics);
    }
    let Some(mut named) = topics else {
        let (code, mut fetched) =
            fetch_group_offsets(shard, group_id, None, member, require_stable).await;
        group_acls::retain_described(shard, ctx, &mut fetched);
        return (code, fetched);
    };
    let refused = group_acls::split_fetch(shard, ctx, &mut named);
    let (code, mut fetched) =
        fetch_group_offsets(shard, group_id, Some(named), member, require_stable).await;
    if code == 0 {
        fetched.extend(refused);
    }
    (code, fetched)
}

pub async fn offset_fetch(
    shard: Rc<Shard>,
    request: OffsetFetchRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let response = if version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for group in &request.groups {
            let topics = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                    .collect()
            });
            // v9 (KIP-848): a consumer group member says who it is.
            let member = if version >= 9 {
                (group.member_id.clone(), group.member_epoch)
            } else {
                (None, -1)
            };
            let (error_code, topics) = fetch_authorized_offsets(
                &shard,
                &ctx,
                &group.group_id,
                topics,
                member,
                request.require_stable,
            )
            .await;
            groups.push(OffsetFetchResponseGroup {
                group_id: group.group_id.clone(),
                error_code,
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| OffsetFetchResponseTopics {
                        name,
                        partitions: partitions
                            .into_iter()
                            .map(|(p, offset, epoch, metadata, error)| {
                                OffsetFetchResponsePartitions {
                                    partition_index: p,
                                    committed_offset: offset,
                                    committed_leader_epoch: epoch,
                                    metadata,
                                    error_code: error,
                                    ..Default::default()
                                }
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
        }
        OffsetFetchResponse {
            groups,
            ..Default::default()
        }
    } else {
        // v0-1 must name topics; null (all) exists from v2.
        let topics = request.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        });
        let (error_code, topics) = fetch_authorized_offsets(
            &shard,
            &ctx,
            &request.group_id,
            topics,
            (None, -1),
            request.require_stable,
        )
        .await;
        OffsetFetchResponse {
            error_code: if version >= 2 { error_code } else { 0 },
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetFetchResponseTopic {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(
                            |(p, offset, epoch, metadata, error)| OffsetFetchResponsePartition {
                                partition_index: p,
                                committed_offset: offset,
                                committed_leader_epoch: if version >= 5 { epoch } else { -1 },
                                metadata,
                                error_code: error,
                                ..Default::default()
                            },
                        )
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    encode_response(&ctx, version, &response)
}

pub async fn offset_delete(
    shard: Rc<Shard>,
    request: OffsetDeleteRequest,
    ctx: RequestContext,
) -> Response {
    let group_id = request.group_id.clone();
    let error = |code: ErrorCode| OffsetDeleteResponse {
        error_code: code.code(),
        ..Default::default()
    };
    // Kafka: DELETE on the group, then READ on each topic.
    let mut request = request;
    let mut refused = Vec::new();
    let mut response = if !shard.authorize(&ctx, Delete, Group, &group_id) {
        error(ErrorCode::GroupAuthorizationFailed)
    } else if invalid_group_id(&group_id) {
        error(ErrorCode::InvalidGroupId)
    } else {
        refused = group_acls::split_delete(&shard, &ctx, &mut request.topics);
        let delete = |partition| calls::OffsetDelete { partition, request };
        call(&shard, &group_id, delete).await.unwrap_or_else(error)
    };
    response.topics.extend(refused);
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn list_groups(
    shard: Rc<Shard>,
    request: ListGroupsRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let mut groups = Vec::new();
    for target in 0..shard.shard_count() {
        groups.extend(shard.call(target, calls::ListGroups).await);
    }
    // KIP-518 state filter (v4+) and KIP-848 type filter (v5+), both case-insensitive.
    groups.retain(|g| {
        (request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|s| s.eq_ignore_ascii_case(&g.group_state)))
            && (request.types_filter.is_empty()
                || request
                    .types_filter
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(&g.group_type)))
    });
    // Kafka: every group with DESCRIBE on the cluster, else those the request may DESCRIBE.
    if !shard.authorize_cluster(&ctx, Describe) {
        groups.retain(|g| shard.authorize(&ctx, Describe, Group, &g.group_id));
    }
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    for g in &mut groups {
        if version < 4 {
            g.group_state = String::new();
        }
        if version < 5 {
            g.group_type = String::new();
        }
    }
    let response = ListGroupsResponse {
        groups,
        ..Default::default()
    };
    encode_response(&ctx, version, &response)
}

pub async fn describe_groups(
    shard: Rc<Shard>,
    request: DescribeGroupsRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in &request.groups {
        let failed = |code: ErrorCode| DescribedGroup {
            error_code: code.code(),
            group_id: group_id.clone(),
            ..Default::default()
        };
        // Kafka 4.4 looks an empty group id up as any other (an unknown group: Dead, no
        // error), unlike the other group APIs.
        let mut described = if !shard.authorize(&ctx, Describe, Group, group_id) {
            failed(ErrorCode::GroupAuthorizationFailed)
        } else {
            let describe = |partition| calls::DescribeGroup {
                partition,
                group_id: group_id.clone(),
            };
            call(&shard, group_id, describe)
                .await
                .unwrap_or_else(failed)
        };
        // Kafka sets it on the groups answered without an error.
        described.authorized_operations =
            if version >= 3 && request.include_authorized_operations && described.error_code == 0 {
                shard.authorized_operations(&ctx, Group, group_id)
            } else {
                i32::MIN
            };
        if version < 4 {
            for member in &mut described.members {
                member.group_instance_id = None;
            }
        }
        groups.push(described);
    }
    let response = DescribeGroupsResponse {
        groups,
        ..Default::default()
    };
    encode_response(&ctx, version, &response)
}

pub async fn delete_groups(
    shard: Rc<Shard>,
    request: DeleteGroupsRequest,
    ctx: RequestContext,
) -> Response {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in &request.groups_names {
        let result = if !shard.authorize(&ctx, Delete, Group, group_id) {
            Err(ErrorCode::GroupAuthorizationFailed)
        } else if invalid_group_id(group_id) {
            Err(ErrorCode::InvalidGroupId)
        } else {
            let delete = |partition| calls::DeleteGroup {
                partition,
                group_id: group_id.clone(),
            };
            call(&shard, group_id, delete).await.and_then(|r| r)
        };
        results.push(DeletableGroupResult {
            group_id: group_id.clone(),
            error_code: code_of(result),
            ..Default::default()
        });
    }
    let response = DeleteGroupsResponse {
        results,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::classic::{JoinRefused, Joined, JoinedMember, Synced};
    use crate::group::GroupError;

    #[test]
    fn join_and_sync_replies_become_their_responses() {
        let refused = join_response(Err(JoinFailed::new("m-1", ErrorCode::MemberIdRequired)));
        assert_eq!(
            (
                refused.error_code,
                refused.generation_id,
                refused.member_id.as_str()
            ),
            (ErrorCode::MemberIdRequired.code(), -1, "m-1")
        );
        assert_eq!(
            (refused.protocol_name, refused.members.len()),
            (Some(String::new()), 0)
        );
        let by_group = join_response(Err(JoinRefused {
            member_id: "m-2".into(),
            error: GroupError::UnknownMemberId,
        }
        .into()));
        assert_eq!(by_group.error_code, ErrorCode::UnknownMemberId.code());
        assert_eq!(
            (by_group.member_id.as_str(), by_group.protocol_name),
            ("m-2", None)
        );
        let joined = join_response(Ok(Joined {
            generation_id: 3,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: "a".into(),
            member_id: "a".into(),
            members: vec![JoinedMember {
                member_id: "a".into(),
                group_instance_id: Some("i".into()),
                metadata: Bytes::from_static(b"md"),
            }],
            skip_assignment: true,
        }));
        assert_eq!((joined.error_code, joined.generation_id), (0, 3));
        assert_eq!(joined.leader, "a");
        assert!(joined.skip_assignment);
        assert_eq!(joined.members[0].group_instance_id.as_deref(), Some("i"));
        assert_eq!(&joined.members[0].metadata[..], b"md");

        let synced = sync_response(Ok(Synced {
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::from_static(b"A"),
        }));
        assert_eq!((synced.error_code, &synced.assignment[..]), (0, &b"A"[..]));
        let failed = sync_response(Err(ErrorCode::RebalanceInProgress));
        assert_eq!(failed.error_code, ErrorCode::RebalanceInProgress.code());
        assert_eq!((failed.protocol_type, failed.assignment.len()), (None, 0));
        assert_eq!(code_of(Ok(())), 0);
    }

    #[test]
    fn leave_group_v3_with_no_members_names_none() {
        use wire::generated::leave_group_request::MemberIdentity;
        assert!(leaving_members(5, String::new(), Vec::new()).is_empty());
        assert_eq!(
            leaving_members(2, "m".into(), Vec::new()),
            vec![("m".to_string(), None)]
        );
        let listed = vec![MemberIdentity {
            member_id: "a".into(),
            group_instance_id: Some("i".into()),
            ..Default::default()
        }];
        assert_eq!(
            leaving_members(3, String::new(), listed),
            vec![("a".to_string(), Some("i".to_string()))]
        );
    }

    #[test]
    fn sync_group_v5_needs_its_protocol_type_and_name() {
        let request = |protocol_type: Option<&str>, protocol_name: Option<&str>| SyncGroupRequest {
            protocol_type: protocol_type.map(Into::into),
            protocol_name: protocol_name.map(Into::into),
            ..Default::default()
        };
        assert!(sync_protocol_missing(5, &request(None, Some("range"))));
        assert!(sync_protocol_missing(5, &request(Some("consumer"), None)));
        assert!(!sync_protocol_missing(
            5,
            &request(Some("consumer"), Some("range"))
        ));
        assert!(!sync_protocol_missing(4, &request(None, None)));
    }

    #[test]
    fn join_group_protocol_name_is_null_when_empty_from_v7() {
        let refused = || join_response(Err(JoinFailed::new("m", ErrorCode::InvalidGroupId)));
        for (version, expected) in [(6, Some(String::new())), (7, None), (9, None)] {
            let mut response = refused();
            versioned_protocol_name(&mut response, version);
            assert_eq!(response.protocol_name, expected, "v{version}");
        }
        let mut by_group = join_response(Err(JoinRefused {
            member_id: "m".into(),
            error: GroupError::UnknownMemberId,
        }
        .into()));
        versioned_protocol_name(&mut by_group, 5);
        assert_eq!(by_group.protocol_name, Some(String::new()));
        let mut chosen = refused();
        chosen.protocol_name = Some("range".into());
        versioned_protocol_name(&mut chosen, 9);
        assert_eq!(chosen.protocol_name.as_deref(), Some("range"));
    }
}
