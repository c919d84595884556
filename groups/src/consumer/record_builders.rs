//! The `__consumer_offsets` records a consumer group writes, built from its state.

use std::collections::BTreeMap;

use crate::GroupError;
use wire::group_records::*;
use wire::primitives::Uuid;

use super::{ConsumerGroup, GroupState, Member};
use crate::assignor::{Assignment, TopicSpec};
use crate::records::GroupRecord;

impl ConsumerGroup {
    /// Records that delete the whole group (DeleteGroups): only for an empty group.
    pub fn delete_records(&self) -> Result<Vec<GroupRecord>, GroupError> {
        if self.state() != GroupState::Empty {
            return Err(GroupError::NonEmptyGroup);
        }
        let group_id = self.group_id.clone();
        let mut records = Vec::new();
        for member_id in self.target.keys() {
            records.push(target_member_tombstone(&group_id, member_id));
        }
        records.push(GroupRecord::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataKey {
                group_id: group_id.clone(),
                ..Default::default()
            },
            None,
        ));
        records.push(GroupRecord::ConsumerGroupPartitionMetadata(
            ConsumerGroupPartitionMetadataKey {
                group_id: group_id.clone(),
                ..Default::default()
            },
            None,
        ));
        records.push(GroupRecord::ConsumerGroupMetadata(
            ConsumerGroupMetadataKey {
                group_id,
                ..Default::default()
            },
            None,
        ));
        Ok(records)
    }
}

/// The tombstones that remove a member: its current assignment, its target assignment and
/// its subscription, in that order.
pub(super) fn member_tombstones(group_id: &str, member_id: &str) -> [GroupRecord; 3] {
    [
        GroupRecord::ConsumerGroupCurrentMemberAssignment(
            ConsumerGroupCurrentMemberAssignmentKey {
                group_id: group_id.to_string(),
                member_id: member_id.to_string(),
                ..Default::default()
            },
            None,
        ),
        target_member_tombstone(group_id, member_id),
        GroupRecord::ConsumerGroupMemberMetadata(
            ConsumerGroupMemberMetadataKey {
                group_id: group_id.to_string(),
                member_id: member_id.to_string(),
                ..Default::default()
            },
            None,
        ),
    ]
}

fn target_member_tombstone(group_id: &str, member_id: &str) -> GroupRecord {
    GroupRecord::ConsumerGroupTargetAssignmentMember(
        ConsumerGroupTargetAssignmentMemberKey {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
            ..Default::default()
        },
        None,
    )
}

fn to_record_partitions(
    assignment: &Assignment,
) -> Vec<consumer_group_current_member_assignment_value::TopicPartitions> {
    assignment
        .iter()
        .map(
            |(topic, parts)| consumer_group_current_member_assignment_value::TopicPartitions {
                topic_id: Uuid(*topic),
                partitions: parts.iter().copied().collect(),
                ..Default::default()
            },
        )
        .collect()
}

pub(super) fn member_metadata_record(group_id: &str, member: &Member) -> GroupRecord {
    GroupRecord::ConsumerGroupMemberMetadata(
        ConsumerGroupMemberMetadataKey {
            group_id: group_id.to_string(),
            member_id: member.member_id.clone(),
            ..Default::default()
        },
        Some(ConsumerGroupMemberMetadataValue {
            instance_id: member.instance_id.clone(),
            rack_id: member.rack_id.clone(),
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
            subscribed_topic_names: member.subscribed_topic_names.iter().cloned().collect(),
            subscribed_topic_regex: member.subscribed_topic_regex.clone(),
            rebalance_timeout_ms: member.rebalance_timeout_ms,
            server_assignor: member.server_assignor.clone(),
            ..Default::default()
        }),
    )
}

pub(super) fn current_assignment_record(group_id: &str, member: &Member) -> GroupRecord {
    GroupRecord::ConsumerGroupCurrentMemberAssignment(
        ConsumerGroupCurrentMemberAssignmentKey {
            group_id: group_id.to_string(),
            member_id: member.member_id.clone(),
            ..Default::default()
        },
        Some(ConsumerGroupCurrentMemberAssignmentValue {
            member_epoch: member.member_epoch,
            previous_member_epoch: member.previous_member_epoch,
            state: member.state.code(),
            assigned_partitions: to_record_partitions(&member.assigned),
            partitions_pending_revocation: to_record_partitions(&member.pending_revocation),
            ..Default::default()
        }),
    )
}

pub(super) fn target_member_record(
    group_id: &str,
    member_id: &str,
    assignment: &Assignment,
) -> GroupRecord {
    GroupRecord::ConsumerGroupTargetAssignmentMember(
        ConsumerGroupTargetAssignmentMemberKey {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
            ..Default::default()
        },
        Some(ConsumerGroupTargetAssignmentMemberValue {
            topic_partitions: assignment
                .iter()
                .map(|(topic, parts)| {
                    consumer_group_target_assignment_member_value::TopicPartition {
                        topic_id: Uuid(*topic),
                        partitions: parts.iter().copied().collect(),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        }),
    )
}

pub(super) fn target_epoch_record(group_id: &str, epoch: i32) -> GroupRecord {
    GroupRecord::ConsumerGroupTargetAssignmentMetadata(
        ConsumerGroupTargetAssignmentMetadataKey {
            group_id: group_id.to_string(),
            ..Default::default()
        },
        Some(ConsumerGroupTargetAssignmentMetadataValue {
            assignment_epoch: epoch,
            ..Default::default()
        }),
    )
}

pub(super) fn group_epoch_record(group_id: &str, epoch: i32) -> GroupRecord {
    GroupRecord::ConsumerGroupMetadata(
        ConsumerGroupMetadataKey {
            group_id: group_id.to_string(),
            ..Default::default()
        },
        Some(ConsumerGroupMetadataValue {
            epoch,
            ..Default::default()
        }),
    )
}

pub(super) fn partition_metadata_record(
    group_id: &str,
    metadata: &BTreeMap<String, TopicSpec>,
) -> GroupRecord {
    GroupRecord::ConsumerGroupPartitionMetadata(
        ConsumerGroupPartitionMetadataKey {
            group_id: group_id.to_string(),
            ..Default::default()
        },
        Some(ConsumerGroupPartitionMetadataValue {
            topics: metadata
                .values()
                .map(|t| consumer_group_partition_metadata_value::TopicMetadata {
                    topic_id: Uuid(t.id),
                    topic_name: t.name.clone(),
                    num_partitions: t.partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    )
}
