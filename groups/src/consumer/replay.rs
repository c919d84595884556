//! Replaying records into the group's state, and the indexes derived from its members
//! (partition owner epochs, subscribed topic counts, assignor votes, static members).

use std::collections::BTreeMap;

use wire::group_records::*;

use super::*;
use crate::records::GroupRecord;

impl ConsumerGroup {
    /// Applies one record of this group (the coordinator routes records by group id; records
    /// of other kinds are ignored).
    pub fn replay(&mut self, record: &GroupRecord) {
        match record {
            GroupRecord::ConsumerGroupMetadata(_, value) => match value {
                Some(v) => {
                    self.deleted = false;
                    self.group_epoch = v.epoch;
                }
                None => self.deleted = true,
            },
            GroupRecord::ConsumerGroupPartitionMetadata(_, value) => {
                self.subscription_metadata = value
                    .iter()
                    .flat_map(|v| &v.topics)
                    .map(|t| {
                        let spec = TopicSpec {
                            id: t.topic_id.0,
                            name: t.topic_name.clone(),
                            partitions: t.num_partitions,
                        };
                        (t.topic_name.clone(), spec)
                    })
                    .collect();
            }
            GroupRecord::ConsumerGroupMemberMetadata(key, value) => match value {
                Some(v) => {
                    let mut member = self
                        .members
                        .get(&key.member_id)
                        .cloned()
                        .unwrap_or_else(|| Member::new(&key.member_id));
                    member.instance_id = v.instance_id.clone();
                    member.rack_id = v.rack_id.clone();
                    member.client_id = v.client_id.clone();
                    member.client_host = v.client_host.clone();
                    member.subscribed_topic_names =
                        v.subscribed_topic_names.iter().cloned().collect();
                    member.subscribed_topic_regex = v.subscribed_topic_regex.clone();
                    member.rebalance_timeout_ms = v.rebalance_timeout_ms;
                    member.server_assignor = v.server_assignor.clone();
                    self.update_member(member);
                }
                None => self.remove_member(&key.member_id),
            },
            GroupRecord::ConsumerGroupTargetAssignmentMetadata(_, value) => {
                self.assignment_epoch = value.as_ref().map_or(-1, |v| v.assignment_epoch);
            }
            GroupRecord::ConsumerGroupTargetAssignmentMember(key, value) => match value {
                Some(v) => {
                    let assignment = v
                        .topic_partitions
                        .iter()
                        .filter(|tp| !tp.partitions.is_empty())
                        .map(|tp| (tp.topic_id.0, tp.partitions.iter().copied().collect()))
                        .collect();
                    self.target.insert(key.member_id.clone(), assignment);
                }
                None => {
                    self.target.remove(&key.member_id);
                }
            },
            GroupRecord::ConsumerGroupCurrentMemberAssignment(key, value) => {
                let mut member = self
                    .members
                    .get(&key.member_id)
                    .cloned()
                    .unwrap_or_else(|| Member::new(&key.member_id));
                match value {
                    Some(v) => {
                        member.member_epoch = v.member_epoch;
                        member.previous_member_epoch = v.previous_member_epoch;
                        member.state = MemberState::from_code(v.state);
                        member.assigned = from_record_partitions(&v.assigned_partitions);
                        member.pending_revocation =
                            from_record_partitions(&v.partitions_pending_revocation);
                    }
                    None => {
                        if !self.members.contains_key(&key.member_id) {
                            return;
                        }
                        member.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
                        member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
                        member.assigned.clear();
                        member.pending_revocation.clear();
                    }
                }
                self.update_member(member);
            }
            GroupRecord::OffsetCommit(..) | GroupRecord::GroupMetadata(..) => {}
        }
    }

    fn update_member(&mut self, member: Member) {
        let old = self.members.remove(&member.member_id);
        if let Some(old) = &old {
            self.unindex(old);
        }
        self.index(&member);
        self.members.insert(member.member_id.clone(), member);
    }

    fn remove_member(&mut self, member_id: &str) {
        if let Some(old) = self.members.remove(member_id) {
            self.unindex(&old);
        }
    }

    fn index(&mut self, member: &Member) {
        for name in &member.subscribed_topic_names {
            *self.subscribed_names.entry(name.clone()).or_default() += 1;
        }
        if let Some(assignor) = &member.server_assignor {
            *self.assignor_votes.entry(assignor.clone()).or_default() += 1;
        }
        for assignment in [&member.assigned, &member.pending_revocation] {
            for (topic, parts) in assignment {
                for &p in parts {
                    self.partition_epochs
                        .insert((*topic, p), member.member_epoch);
                }
            }
        }
        if let Some(instance_id) = &member.instance_id {
            self.static_members
                .insert(instance_id.clone(), member.member_id.clone());
        }
    }

    fn unindex(&mut self, member: &Member) {
        for name in &member.subscribed_topic_names {
            decrement(&mut self.subscribed_names, name);
        }
        if let Some(assignor) = &member.server_assignor {
            decrement(&mut self.assignor_votes, assignor);
        }
        for assignment in [&member.assigned, &member.pending_revocation] {
            for (topic, parts) in assignment {
                for &p in parts {
                    // Only the member's own claim is dropped (a record may already have given
                    // the partition to another member).
                    if self.partition_epochs.get(&(*topic, p)) == Some(&member.member_epoch) {
                        self.partition_epochs.remove(&(*topic, p));
                    }
                }
            }
        }
        if let Some(instance_id) = &member.instance_id {
            if self.static_members.get(instance_id) == Some(&member.member_id) {
                self.static_members.remove(instance_id);
            }
        }
    }
}

fn decrement(counts: &mut BTreeMap<String, usize>, key: &str) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

fn from_record_partitions(
    tps: &[consumer_group_current_member_assignment_value::TopicPartitions],
) -> Assignment {
    tps.iter()
        .filter(|tp| !tp.partitions.is_empty())
        .map(|tp| (tp.topic_id.0, tp.partitions.iter().copied().collect()))
        .collect()
}
