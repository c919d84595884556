//! KIP-848 group APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe. Each runs on the
//! group's coordinator shard (`group::calls`), which answers with the `groups` crate's domain
//! types; the responses are built here.

use std::rc::Rc;

use wire::generated::consumer_group_describe_response as describe;
use wire::generated::consumer_group_heartbeat_response as hb;
use wire::generated::*;
use wire::primitives::Uuid;
use wire::ErrorCode;

use acl::AclOperation::{Describe, Read};
use acl::ResourceType::{Group, Topic};

use super::groups::{call, invalid_group_id};
use super::{encode_response, RequestContext, Response};
use crate::group::calls::{self, ConsumerDescribeReply, ConsumerHeartbeatReply, Refused};
use crate::group::consumer::{self, NamedPartitions};
use crate::shard::Shard;

/// The request's fields as the coordinator takes them.
fn heartbeat_request(request: ConsumerGroupHeartbeatRequest) -> consumer::HeartbeatRequest {
    consumer::HeartbeatRequest {
        group_id: request.group_id,
        member_id: request.member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id,
        rack_id: request.rack_id,
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request.subscribed_topic_names,
        subscribed_topic_regex: request.subscribed_topic_regex,
        server_assignor: request.server_assignor,
        topic_partitions: request.topic_partitions.map(|owned| {
            owned
                .into_iter()
                .map(|tp| (tp.topic_id.0, tp.partitions))
                .collect()
        }),
    }
}

fn heartbeat_response(reply: ConsumerHeartbeatReply) -> ConsumerGroupHeartbeatResponse {
    match reply {
        Ok(beat) => ConsumerGroupHeartbeatResponse {
            member_id: Some(beat.member_id),
            member_epoch: beat.member_epoch,
            heartbeat_interval_ms: beat.heartbeat_interval_ms,
            assignment: beat.assignment.map(|assigned| hb::Assignment {
                topic_partitions: assigned
                    .iter()
                    .map(|(topic, parts)| hb::TopicPartitions {
                        topic_id: Uuid(*topic),
                        partitions: parts.iter().copied().collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Err(refused) => ConsumerGroupHeartbeatResponse {
            error_code: refused.code.code(),
            error_message: refused.message,
            ..Default::default()
        },
    }
}

/// KIP-848 ConsumerGroupHeartbeat: runs on the group's coordinator shard.
pub async fn consumer_group_heartbeat(
    shard: Rc<Shard>,
    request: ConsumerGroupHeartbeatRequest,
    ctx: RequestContext,
    client_host: String,
) -> Response {
    let version = ctx.api_version;
    let group_id = request.group_id.clone();
    // Kafka: READ on the group; then DESCRIBE on every subscribed topic named, or the whole
    // heartbeat is refused (TOPIC_AUTHORIZATION_FAILED, no message).
    let refused = if !shard.authorize(&ctx, Read, Group, &group_id) {
        Some(ErrorCode::GroupAuthorizationFailed)
    } else if request
        .subscribed_topic_names
        .as_ref()
        .is_some_and(|names| {
            names
                .iter()
                .any(|name| !shard.authorize(&ctx, Describe, Topic, name))
        })
    {
        Some(ErrorCode::TopicAuthorizationFailed)
    } else {
        None
    };
    if let Some(code) = refused {
        return encode_response(&ctx, version, &heartbeat_response(Err(Refused::code(code))));
    }
    let beat = |partition| calls::ConsumerHeartbeat {
        partition,
        request: Box::new(heartbeat_request(request)),
        version,
        client_id: ctx.client_id.clone(),
        client_host,
    };
    let reply = call(&shard, &group_id, beat)
        .await
        .unwrap_or_else(|code| Err(Refused::code(code)));
    encode_response(&ctx, version, &heartbeat_response(reply))
}

fn described_assignment(partitions: Vec<NamedPartitions>) -> describe::Assignment {
    describe::Assignment {
        topic_partitions: partitions
            .into_iter()
            .map(|p| describe::TopicPartitions {
                topic_id: Uuid(p.topic_id),
                topic_name: p.topic_name,
                partitions: p.partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// ConsumerGroupDescribe's entry for one group (no ACLs: authorized operations are not
/// reported, as Kafka when not asked for them).
fn described_group(group_id: &str, reply: ConsumerDescribeReply) -> describe::DescribedGroup {
    match reply {
        Ok(group) => describe::DescribedGroup {
            group_id: group.group_id,
            group_state: group.state.name().to_string(),
            group_epoch: group.group_epoch,
            assignment_epoch: group.assignment_epoch,
            assignor_name: group.assignor_name,
            members: group
                .members
                .into_iter()
                .map(|m| describe::Member {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    rack_id: m.rack_id,
                    member_epoch: m.member_epoch,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    subscribed_topic_names: m.subscribed_topic_names,
                    subscribed_topic_regex: m.subscribed_topic_regex,
                    assignment: described_assignment(m.assignment),
                    target_assignment: described_assignment(m.target_assignment),
                    ..Default::default()
                })
                .collect(),
            authorized_operations: i32::MIN,
            ..Default::default()
        },
        Err(refused) => describe::DescribedGroup {
            error_code: refused.code.code(),
            error_message: refused.message,
            group_id: group_id.to_string(),
            authorized_operations: i32::MIN,
            ..Default::default()
        },
    }
}

/// KIP-848 ConsumerGroupDescribe: each group from its coordinator shard.
pub async fn consumer_group_describe(
    shard: Rc<Shard>,
    request: ConsumerGroupDescribeRequest,
    ctx: RequestContext,
) -> Response {
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for group_id in &request.group_ids {
        let reply = if !shard.authorize(&ctx, Describe, Group, group_id) {
            Err(Refused::code(ErrorCode::GroupAuthorizationFailed))
        } else if invalid_group_id(group_id) {
            Err(Refused::code(ErrorCode::InvalidGroupId))
        } else {
            let describe = |partition| calls::ConsumerDescribe {
                partition,
                group_id: group_id.clone(),
            };
            call(&shard, group_id, describe)
                .await
                .unwrap_or_else(|code| Err(Refused::code(code)))
        };
        let mut described = described_group(group_id, reply);
        if request.include_authorized_operations && described.error_code == 0 {
            described.authorized_operations = shard.authorized_operations(&ctx, Group, group_id);
        }
        groups.push(described);
    }
    let response = ConsumerGroupDescribeResponse {
        groups,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignor::Assignment;
    use crate::group::consumer::Heartbeated;

    #[test]
    fn heartbeat_replies_become_their_responses() {
        let assigned: Assignment = [([7; 16], [0, 2].into_iter().collect())].into();
        let beat = heartbeat_response(Ok(Heartbeated {
            member_id: "m".into(),
            member_epoch: 4,
            heartbeat_interval_ms: 5000,
            assignment: Some(assigned),
        }));
        assert_eq!((beat.error_code, beat.member_id.as_deref()), (0, Some("m")));
        assert_eq!((beat.member_epoch, beat.heartbeat_interval_ms), (4, 5000));
        let tps = beat.assignment.unwrap().topic_partitions;
        assert_eq!(
            (tps[0].topic_id, tps[0].partitions.clone()),
            (Uuid([7; 16]), vec![0, 2])
        );
        let refused = heartbeat_response(Err(Refused {
            code: ErrorCode::FencedMemberEpoch,
            message: Some("fenced".into()),
        }));
        assert_eq!(refused.error_code, ErrorCode::FencedMemberEpoch.code());
        assert_eq!(refused.error_message.as_deref(), Some("fenced"));
        assert_eq!((refused.member_id, refused.member_epoch), (None, 0));
        let missing = described_group("g", Err(Refused::code(ErrorCode::NotCoordinator)));
        assert_eq!(
            (missing.group_id.as_str(), missing.authorized_operations),
            ("g", i32::MIN)
        );
    }
}
