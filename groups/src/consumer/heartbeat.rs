//! The ConsumerGroupHeartbeat state machine (Kafka's `consumerGroupHeartbeat`): join, heartbeat,
//! leave and static leave, each a list of records applied as they are made.

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use wire::primitives::Uuid;

use super::reconcile::reconcile;
use super::record_builders::*;
use super::request_checks::{check_member_epoch, fenced_instance, validate_request};
use super::*;
use crate::assignor::{Assign, MemberSpec, TopicSpec};
use crate::records::GroupRecord;

impl ConsumerGroup {
    /// Handles a ConsumerGroupHeartbeat: join (epoch 0), heartbeat, leave (-1) or static leave
    /// (-2). Returns the reply and the records to write, already applied to the state (a
    /// refusal may come with the records made before it).
    pub fn heartbeat(
        &mut self,
        request: &HeartbeatRequest,
        context: &RequestContext,
        now_ms: i64,
        topics: &dyn TopicLookup,
        config: &ConsumerGroupConfig,
    ) -> (HeartbeatReply, Vec<GroupRecord>) {
        let mut records = Vec::new();
        let result = validate_request(request, config).and_then(|()| {
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
                || request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            {
                self.leave(request, topics, &mut records)
            } else {
                self.join_or_heartbeat(request, context, now_ms, topics, config, &mut records)
            }
        });
        (result, records)
    }

    fn not_found(&self) -> Refusal {
        Refusal::new(
            GroupError::GroupIdNotFound,
            format!("Group {} not found.", self.group_id),
        )
    }

    fn unknown_member(&self, member_id: &str) -> Refusal {
        Refusal::new(
            GroupError::UnknownMemberId,
            format!(
                "Member {member_id} is not a member of group {}.",
                self.group_id
            ),
        )
    }

    fn leave(
        &mut self,
        request: &HeartbeatRequest,
        topics: &dyn TopicLookup,
        records: &mut Vec<GroupRecord>,
    ) -> HeartbeatReply {
        if !self.exists() {
            return Err(self.not_found());
        }
        let member_id = match &request.instance_id {
            None => {
                if !self.members.contains_key(&request.member_id) {
                    return Err(self.unknown_member(&request.member_id));
                }
                request.member_id.clone()
            }
            Some(instance_id) => {
                let member_id = self.static_member_of(instance_id)?;
                if member_id != request.member_id {
                    return Err(fenced_instance(&request.member_id, instance_id, &member_id));
                }
                member_id
            }
        };
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            // Not fenced: the member keeps its partitions (at epoch -2) for the instance that
            // rejoins within the session timeout.
            let mut leaving = self.members[&member_id].clone();
            leaving.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
            leaving.pending_revocation.clear();
            let record = current_assignment_record(&self.group_id, &leaving);
            self.emit(records, record);
            self.timers.rebalance.remove(&member_id);
        } else {
            self.fence_member(&member_id, topics, records);
        }
        Ok(Heartbeated {
            member_id,
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    fn static_member_of(&self, instance_id: &str) -> Result<String, Refusal> {
        self.static_members
            .get(instance_id)
            .cloned()
            .ok_or(Refusal::new(
                GroupError::UnknownMemberId,
                format!("Instance id {instance_id} is unknown."),
            ))
    }

    fn join_or_heartbeat(
        &mut self,
        request: &HeartbeatRequest,
        context: &RequestContext,
        now_ms: i64,
        topics: &dyn TopicLookup,
        config: &ConsumerGroupConfig,
        records: &mut Vec<GroupRecord>,
    ) -> HeartbeatReply {
        let joining = request.member_epoch == 0;
        if !joining && !self.exists() {
            return Err(self.not_found());
        }
        let is_known =
            !request.member_id.is_empty() && self.members.contains_key(&request.member_id);
        if self.members.len() as u64 >= u64::from(config.max_size) && !is_known {
            return Err(Refusal::new(
                GroupError::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    config.max_size
                ),
            ));
        }
        let member_id = if request.member_id.is_empty() {
            self.new_member_id()
        } else {
            request.member_id.clone()
        };
        let owned = request.topic_partitions.clone();

        // The member before this request, and the static member it replaces, if any.
        let (member, replaced) = match &request.instance_id {
            None => match self.members.get(&member_id) {
                Some(existing) => {
                    check_member_epoch(existing, request.member_epoch, owned.as_deref())?;
                    (existing.clone(), None)
                }
                None if joining => (Member::new(&member_id), None),
                None => return Err(self.unknown_member(&member_id)),
            },
            Some(instance_id) => {
                match self.static_members.get(instance_id).cloned() {
                    None if joining => (
                        self.members
                            .get(&member_id)
                            .cloned()
                            .unwrap_or_else(|| Member::new(&member_id)),
                        None,
                    ),
                    None => {
                        return Err(self
                            .static_member_of(instance_id)
                            .expect_err("no static member id means the lookup failed"))
                    }
                    Some(previous_id) if joining && previous_id != member_id => {
                        let previous = &self.members[&previous_id];
                        if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                            return Err(Refusal::new(
                                GroupError::UnreleasedInstanceId,
                                format!(
                                    "Static member {member_id} with instance id {instance_id} \
                                     cannot join the group because the instance id is owned \
                                     by {previous_id} member."
                                ),
                            ));
                        }
                        // The rejoining instance takes over the departed member's assignment.
                        let mut member = previous.clone();
                        member.member_id = member_id.clone();
                        member.member_epoch = 0;
                        member.previous_member_epoch = 0;
                        (member, Some(previous_id))
                    }
                    Some(previous_id) => {
                        if previous_id != member_id {
                            return Err(fenced_instance(&member_id, instance_id, &previous_id));
                        }
                        let existing = &self.members[&previous_id];
                        check_member_epoch(existing, request.member_epoch, owned.as_deref())?;
                        (existing.clone(), None)
                    }
                }
            }
        };

        if let Some(previous_id) = &replaced {
            let target = self.target_assignment(previous_id);
            self.remove_member_records(previous_id, records);
            self.cancel_timers(previous_id);
            let group_id = self.group_id.clone();
            self.emit(records, member_metadata_record(&group_id, &member));
            self.emit(
                records,
                target_member_record(&group_id, &member_id, &target),
            );
            self.emit(records, current_assignment_record(&group_id, &member));
        }
        let before = if replaced.is_some() {
            member.clone()
        } else {
            self.members
                .get(&member_id)
                .cloned()
                .unwrap_or_else(|| Member::new(&member_id))
        };

        // 1. The member's subscription and settings.
        let mut updated = member.clone();
        if let Some(instance_id) = &request.instance_id {
            updated.instance_id = Some(instance_id.clone());
        }
        if let Some(rack_id) = &request.rack_id {
            updated.rack_id = Some(rack_id.clone());
        }
        if request.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(assignor) = &request.server_assignor {
            updated.server_assignor = Some(assignor.clone());
        }
        if let Some(names) = &request.subscribed_topic_names {
            updated.subscribed_topic_names = names.iter().cloned().collect();
        }
        if let Some(regex) = &request.subscribed_topic_regex {
            updated.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
        }
        updated.client_id = context.client_id.to_string();
        updated.client_host = context.client_host.to_string();
        let is_new = !self.members.contains_key(&member_id);
        let mut bump = false;
        if is_new || !updated.same_metadata(&member) {
            let record = member_metadata_record(&self.group_id, &updated);
            self.emit(records, record);
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
                || updated.subscribed_topic_regex != member.subscribed_topic_regex;
        }

        // 2. The subscribed topics' metadata, then the group epoch.
        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            bump = true;
            let record = partition_metadata_record(&self.group_id, &metadata);
            self.emit(records, record);
        }
        if bump {
            let record = group_epoch_record(&self.group_id, self.group_epoch + 1);
            self.emit(records, record);
        }

        // 3. A new target assignment for the new group epoch.
        if self.group_epoch > self.assignment_epoch {
            self.compute_target_assignment(config, records);
        }

        // 4. Reconcile the member towards its target.
        let current = self.members[&member_id].clone();
        if !current.is_reconciled_to(self.assignment_epoch) {
            let target = self.target_assignment(&member_id);
            let next = reconcile(
                &current,
                self.assignment_epoch,
                &target,
                owned.as_deref(),
                |t, p| self.current_partition_epoch(t, p),
            )?;
            if !next.same_assignment_state(&current) {
                let record = current_assignment_record(&self.group_id, &next);
                self.emit(records, record);
                if next.state == MemberState::UnrevokedPartitions {
                    let deadline = now_ms + i64::from(next.rebalance_timeout_ms.max(0));
                    self.timers
                        .rebalance
                        .insert(member_id.clone(), (next.member_epoch, deadline));
                } else {
                    self.timers.rebalance.remove(&member_id);
                }
            }
        }
        self.timers.session.insert(
            member_id.clone(),
            now_ms + i64::from(config.session_timeout_ms),
        );

        let now = &self.members[&member_id];
        let full_request = joining
            || (request.rebalance_timeout_ms != -1
                && request.subscribed_topic_names.is_some()
                && request.topic_partitions.is_some());
        let assignment =
            (full_request || now.assigned != before.assigned).then(|| now.assigned.clone());
        Ok(Heartbeated {
            member_id,
            member_epoch: now.member_epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment,
        })
    }

    /// A member id for a v0 join without one (Kafka's `Uuid.randomUuid().toString()`).
    fn new_member_id(&self) -> String {
        loop {
            let state = RandomState::new();
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(8).enumerate() {
                let mut hasher = state.build_hasher();
                hasher.write_usize(i);
                hasher.write(self.group_id.as_bytes());
                chunk.copy_from_slice(&hasher.finish().to_be_bytes());
            }
            let id = Uuid(bytes).to_string();
            if !self.members.contains_key(&id) {
                return id;
            }
        }
    }

    fn compute_subscription_metadata(
        &self,
        topics: &dyn TopicLookup,
    ) -> BTreeMap<String, TopicSpec> {
        self.subscribed_names
            .keys()
            .filter_map(|name| {
                topics.topic(name).map(|(id, partitions)| {
                    let spec = TopicSpec {
                        id,
                        name: name.clone(),
                        partitions,
                    };
                    (name.clone(), spec)
                })
            })
            .collect()
    }

    fn compute_target_assignment(
        &mut self,
        config: &ConsumerGroupConfig,
        records: &mut Vec<GroupRecord>,
    ) {
        let specs: Vec<MemberSpec> = self
            .members
            .values()
            .map(|m| MemberSpec {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                topics: m.subscribed_topic_names.clone(),
                current: self.target_assignment(&m.member_id),
            })
            .collect();
        let topics: Vec<TopicSpec> = self.subscription_metadata.values().cloned().collect();
        let assignment = self.preferred_assignor(config).assign(&specs, &topics);
        let group_id = self.group_id.clone();
        for (member_id, new) in assignment {
            if self.target.get(&member_id) != Some(&new) {
                self.emit(records, target_member_record(&group_id, &member_id, &new));
            }
        }
        let epoch = self.group_epoch;
        self.emit(records, target_epoch_record(&group_id, epoch));
    }

    /// Removes the member (tombstones for its assignment, target and subscription) and bumps
    /// the group epoch so that the others get its partitions.
    pub(super) fn fence_member(
        &mut self,
        member_id: &str,
        topics: &dyn TopicLookup,
        records: &mut Vec<GroupRecord>,
    ) {
        self.remove_member_records(member_id, records);
        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            let record = partition_metadata_record(&self.group_id, &metadata);
            self.emit(records, record);
        }
        let record = group_epoch_record(&self.group_id, self.group_epoch + 1);
        self.emit(records, record);
        self.cancel_timers(member_id);
    }

    fn remove_member_records(&mut self, member_id: &str, records: &mut Vec<GroupRecord>) {
        for record in member_tombstones(&self.group_id, member_id) {
            self.emit(records, record);
        }
    }

    fn emit(&mut self, records: &mut Vec<GroupRecord>, record: GroupRecord) {
        self.replay(&record);
        records.push(record);
    }
}
