//! ConsumerGroupHeartbeat's request checks (Kafka's
//! `throwIfConsumerGroupHeartbeatRequestIsInvalid` and the member epoch check) and the
//! refusals they return.

use super::*;

pub(super) fn fenced_instance(member_id: &str, instance_id: &str, owner: &str) -> Refusal {
    Refusal::new(
        GroupError::FencedInstanceId,
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {owner}."),
    )
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| v.trim().is_empty())
}

fn invalid(message: &str) -> Refusal {
    Refusal::new(GroupError::InvalidRequest, message.to_string())
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (v0-1: an empty member id on join
/// asks the coordinator for one).
pub(super) fn validate_request(
    request: &HeartbeatRequest,
    config: &ConsumerGroupConfig,
) -> Result<(), Refusal> {
    if request.group_id.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if is_blank(&request.instance_id) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if is_blank(&request.rack_id) {
        return Err(invalid("RackId can't be empty."));
    }
    let epoch = request.member_epoch;
    if epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH {
        if request.member_id.trim().is_empty() {
            return Err(invalid("MemberId can't be empty."));
        }
    } else if epoch == 0 {
        if request.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if request
            .topic_partitions
            .as_ref()
            .is_none_or(|tps| !tps.is_empty())
        {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when \
                 (re-)joining.",
            ));
        }
    } else if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if request.member_id.trim().is_empty() {
            return Err(invalid("MemberId can't be empty."));
        }
        if request.instance_id.is_none() {
            return Err(invalid("InstanceId can't be null."));
        }
    } else {
        return Err(invalid("MemberEpoch is invalid."));
    }
    // An empty regex is no regex (librdkafka sends one beside a list of names).
    if request
        .subscribed_topic_regex
        .as_deref()
        .is_some_and(|r| !r.is_empty())
    {
        return Err(Refusal::new(
            GroupError::InvalidRegularExpression,
            "SubscribedTopicRegex is not supported by this broker.".to_string(),
        ));
    }
    if let Some(name) = &request.server_assignor {
        let supported = Assignor::from_name(name).is_some_and(|a| config.assignors.contains(&a));
        if !supported {
            let names: Vec<&str> = config.assignors.iter().map(|a| a.name()).collect();
            return Err(Refusal::new(
                GroupError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`, with KAFKA-19233: epoch 0 always
/// rejoins; the previous epoch is accepted when the member owns a subset of its assignment
/// (the response that bumped it was lost).
pub(super) fn check_member_epoch(
    member: &Member,
    received: i32,
    owned: Option<&[(TopicId, Vec<i32>)]>,
) -> Result<(), Refusal> {
    let fenced =
        || {
            Refusal::new(
                GroupError::FencedMemberEpoch,
                format!(
                "The consumer group member has a {} member epoch ({received}) than the one known \
                 by the group coordinator ({}). The member must abandon all its partitions and \
                 rejoin.",
                if received > member.member_epoch { "greater" } else { "smaller" },
                member.member_epoch
            ),
            )
        };
    if received == 0 {
        return Ok(());
    }
    if received > member.member_epoch {
        return Err(fenced());
    }
    if received < member.member_epoch {
        let subset = owned.is_some_and(|owned| {
            owned.iter().all(|(topic, parts)| {
                member
                    .assigned
                    .get(topic)
                    .is_some_and(|mine| parts.iter().all(|p| mine.contains(p)))
            })
        });
        if received != member.previous_member_epoch || !subset {
            return Err(fenced());
        }
    }
    Ok(())
}
