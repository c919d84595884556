//! A classic group as the `GroupMetadataValue` record Kafka writes for it, and its rebuild from
//! that record at load.

use wire::group_records::group_metadata_value::MemberMetadata;
use wire::group_records::GroupMetadataValue;

use super::{ClassicGroup, Member, State};

impl ClassicGroup {
    /// The record Kafka writes for a classic group.
    pub fn to_record(&self, now_wall_ms: i64) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now_wall_ms,
            members: self
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Rebuilds the group from its last record at load: members are Stable with a fresh
    /// session (Kafka schedules their heartbeat expiry the same way), or Empty.
    pub fn replay(&mut self, value: Option<&GroupMetadataValue>, now: u64) {
        *self = ClassicGroup::new();
        let Some(value) = value else {
            self.set_state(State::Dead);
            return;
        };
        self.generation = value.generation;
        self.protocol_type = (!value.protocol_type.is_empty()).then(|| value.protocol_type.clone());
        self.protocol_name = value.protocol.clone();
        self.leader = value.leader.clone();
        for m in &value.members {
            self.next_seq += 1;
            if let Some(instance) = &m.group_instance_id {
                self.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            self.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout,
                    rebalance_timeout_ms: m.rebalance_timeout,
                    protocols: vec![(
                        value.protocol.clone().unwrap_or_default(),
                        m.subscription.clone(),
                    )],
                    assignment: m.assignment.clone(),
                    join_waiter: None,
                    sync_waiter: None,
                    heartbeat_deadline: now + m.session_timeout.max(0) as u64,
                    joined_seq: self.next_seq,
                },
            );
        }
        self.set_state(if self.members.is_empty() {
            State::Empty
        } else {
            State::Stable
        });
    }
}
