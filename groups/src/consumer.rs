//! A KIP-848 consumer group (`group.protocol=consumer`): the state one coordinator keeps for
//! it, the ConsumerGroupHeartbeat state machine and ConsumerGroupDescribe, as Kafka's
//! `GroupMetadataManager.consumerGroupHeartbeat`, `ConsumerGroup` and `CurrentAssignmentBuilder`
//! do it.
//!
//! Three epochs: the group epoch is bumped when a subscription, the membership or the
//! subscribed topics' metadata change; the assignment epoch is the group epoch a target
//! assignment was computed for; each member's epoch says which target it has reconciled to. A
//! member is given a partition only once its previous owner has stopped reporting it (the
//! partition's owner epoch is gone), so a partition is never consumed by two members.
//!
//! Every change is a [`GroupRecord`] and the live state is changed only by replaying the
//! records a call returns ([`ConsumerGroup::replay`]), as Kafka's coordinator does: the state
//! rebuilt from `__consumer_offsets` at start is the state that wrote it. Timers (session and
//! rebalance deadlines) are soft state, rebuilt by [`ConsumerGroup::schedule_after_load`].
//!
//! I/O-free: the coordinator writes the records and calls [`ConsumerGroup::expire`] when
//! [`ConsumerGroup::next_deadline`] passes.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};

use wire::generated::consumer_group_describe_response as describe;
use wire::generated::consumer_group_heartbeat_response as hb;
use wire::generated::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use wire::group_records::*;
use wire::primitives::Uuid;
use wire::ErrorCode;

use super::assignor::{Assign, Assignment, Assignor, MemberSpec, TopicId, TopicSpec};
use super::records::GroupRecord;

/// `member_epoch` of a request leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// `member_epoch` of a static member leaving for now (it will rejoin with its instance id).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;
/// The protocol type ListGroups shows for these groups.
pub const PROTOCOL_TYPE: &str = "consumer";

pub use config::ConsumerGroupConfig;

/// Where a member stands in reconciling to the target assignment (Kafka's `MemberState`;
/// the numbers are the record's `State` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Waiting for the member to revoke partitions it must give up.
    UnrevokedPartitions,
    /// Waiting for other members to release partitions this one is to receive.
    UnreleasedPartitions,
    /// A state from a later Kafka: the member is fenced unless it owns nothing.
    Unknown,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_code(code: i8) -> MemberState {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// The group's state as ListGroups and the describe APIs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// One member: its subscription (the member metadata record) and its current assignment (the
/// current member assignment record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

impl Member {
    fn new(member_id: &str) -> Member {
        Member {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: -1,
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }

    fn is_reconciled_to(&self, assignment_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == assignment_epoch
    }

    /// The fields of the member metadata record (what a heartbeat may change).
    fn same_metadata(&self, other: &Member) -> bool {
        self.instance_id == other.instance_id
            && self.rack_id == other.rack_id
            && self.client_id == other.client_id
            && self.client_host == other.client_host
            && self.subscribed_topic_names == other.subscribed_topic_names
            && self.subscribed_topic_regex == other.subscribed_topic_regex
            && self.server_assignor == other.server_assignor
            && self.rebalance_timeout_ms == other.rebalance_timeout_ms
    }

    fn same_assignment_state(&self, other: &Member) -> bool {
        self.member_epoch == other.member_epoch
            && self.previous_member_epoch == other.previous_member_epoch
            && self.state == other.state
            && self.assigned == other.assigned
            && self.pending_revocation == other.pending_revocation
    }
}

/// The request's context beside its body.
#[derive(Clone, Debug, Default)]
pub struct RequestContext<'a> {
    pub api_version: i16,
    pub client_id: &'a str,
    pub client_host: &'a str,
}

/// Looks topics up for subscriptions.
pub trait TopicLookup {
    /// The topic's id and partition count, if it exists.
    fn topic(&self, name: &str) -> Option<(TopicId, i32)>;
}

impl<F: Fn(&str) -> Option<(TopicId, i32)>> TopicLookup for F {
    fn topic(&self, name: &str) -> Option<(TopicId, i32)> {
        self(name)
    }
}

/// A refused request: Kafka's code and the message its exception carries.
type Refusal = (ErrorCode, String);

/// Soft state: when members must have heartbeated or revoked by.
#[derive(Clone, Debug, Default)]
struct Timers {
    /// Member id -> session deadline (ms).
    session: HashMap<String, i64>,
    /// Member id -> (the epoch it must leave, deadline (ms)) while it holds partitions it must
    /// revoke.
    rebalance: HashMap<String, (i32, i64)>,
}

/// One consumer group's state.
#[derive(Clone, Debug)]
pub struct ConsumerGroup {
    group_id: String,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// Instance id -> member id.
    static_members: BTreeMap<String, String>,
    /// Member id -> target assignment.
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics as of the group epoch, by name.
    subscription_metadata: BTreeMap<String, TopicSpec>,
    /// Derived: the epoch each owned partition (assigned or pending revocation) is held at.
    partition_epochs: HashMap<(TopicId, i32), i32>,
    /// Derived: topic name -> members subscribing to it.
    subscribed_names: BTreeMap<String, usize>,
    /// Derived: assignor name -> members asking for it.
    assignor_votes: BTreeMap<String, usize>,
    /// A group metadata tombstone was replayed: the coordinator drops the group.
    deleted: bool,
    timers: Timers,
}

impl PartialEq for ConsumerGroup {
    /// Equality of the durable state (timers are soft state).
    fn eq(&self, other: &Self) -> bool {
        self.group_id == other.group_id
            && self.group_epoch == other.group_epoch
            && self.assignment_epoch == other.assignment_epoch
            && self.members == other.members
            && self.static_members == other.static_members
            && self.target == other.target
            && self.subscription_metadata == other.subscription_metadata
            && self.partition_epochs == other.partition_epochs
            && self.subscribed_names == other.subscribed_names
            && self.assignor_votes == other.assignor_votes
            && self.deleted == other.deleted
    }
}

impl ConsumerGroup {
    /// A group that does not exist yet: a join creates it, anything else is GROUP_ID_NOT_FOUND.
    pub fn new(group_id: &str) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscription_metadata: BTreeMap::new(),
            partition_epochs: HashMap::new(),
            subscribed_names: BTreeMap::new(),
            assignor_votes: BTreeMap::new(),
            deleted: false,
            timers: Timers::default(),
        }
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    pub fn members(&self) -> &BTreeMap<String, Member> {
        &self.members
    }

    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.get(member_id)
    }

    /// The member's target assignment (empty if none).
    pub fn target_assignment(&self, member_id: &str) -> Assignment {
        self.target.get(member_id).cloned().unwrap_or_default()
    }

    /// Whether the group has any durable state (a fresh [`ConsumerGroup::new`] does not).
    pub fn exists(&self) -> bool {
        !self.deleted
            && (self.group_epoch > 0 || self.assignment_epoch > 0 || !self.members.is_empty())
    }

    /// A group metadata tombstone was replayed: the coordinator should forget the group.
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| !m.is_reconciled_to(self.assignment_epoch))
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// The epoch the partition is owned at, or -1 when free.
    pub fn current_partition_epoch(&self, topic: TopicId, partition: i32) -> i32 {
        self.partition_epochs
            .get(&(topic, partition))
            .copied()
            .unwrap_or(-1)
    }

    /// The assignor most members ask for, else the configured default.
    fn preferred_assignor(&self, config: &ConsumerGroupConfig) -> Assignor {
        let mut best: Option<(usize, Assignor)> = None;
        // Ties go to the earlier assignor in `group.consumer.assignors`.
        for assignor in &config.assignors {
            let votes = self
                .assignor_votes
                .get(assignor.name())
                .copied()
                .unwrap_or(0);
            if votes > 0 && best.is_none_or(|(b, _)| votes > b) {
                best = Some((votes, *assignor));
            }
        }
        best.map_or(config.default_assignor(), |(_, a)| a)
    }

    /// The earliest session or rebalance deadline, for the coordinator's timer.
    pub fn next_deadline(&self) -> Option<i64> {
        let session = self.timers.session.values().copied();
        let rebalance = self.timers.rebalance.values().map(|(_, d)| *d);
        session.chain(rebalance).min()
    }

    /// After replaying the group at start: every member gets a fresh session, and those
    /// revoking a fresh rebalance timeout, as Kafka does when a coordinator loads.
    pub fn schedule_after_load(&mut self, now_ms: i64, config: &ConsumerGroupConfig) {
        self.timers = Timers::default();
        for member in self.members.values() {
            self.timers.session.insert(
                member.member_id.clone(),
                now_ms + i64::from(config.session_timeout_ms),
            );
            if member.state == MemberState::UnrevokedPartitions {
                self.timers.rebalance.insert(
                    member.member_id.clone(),
                    (
                        member.member_epoch,
                        now_ms + i64::from(member.rebalance_timeout_ms.max(0)),
                    ),
                );
            }
        }
    }

    /// Fences the members whose session expired, or who did not revoke within their rebalance
    /// timeout; returns the records (already applied).
    pub fn expire(&mut self, now_ms: i64, topics: &dyn TopicLookup) -> Vec<GroupRecord> {
        let mut expired: BTreeSet<String> = self
            .timers
            .session
            .iter()
            .filter(|(_, &deadline)| deadline <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for (id, &(epoch, deadline)) in &self.timers.rebalance {
            let still_revoking = self
                .members
                .get(id)
                .is_some_and(|m| m.member_epoch == epoch);
            if deadline <= now_ms && still_revoking {
                expired.insert(id.clone());
            }
        }
        let mut records = Vec::new();
        for id in expired {
            if self.members.contains_key(&id) {
                self.fence_member(&id, topics, &mut records);
            } else {
                self.cancel_timers(&id);
            }
        }
        records
    }

    /// Handles a ConsumerGroupHeartbeat: join (epoch 0), heartbeat, leave (-1) or static leave
    /// (-2). Returns the response and the records to write, already applied to the state.
    pub fn heartbeat(
        &mut self,
        request: &ConsumerGroupHeartbeatRequest,
        context: &RequestContext,
        now_ms: i64,
        topics: &dyn TopicLookup,
        config: &ConsumerGroupConfig,
    ) -> (ConsumerGroupHeartbeatResponse, Vec<GroupRecord>) {
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
        match result {
            Ok(response) => (response, records),
            Err((code, message)) => (
                ConsumerGroupHeartbeatResponse {
                    error_code: code.code(),
                    error_message: Some(message),
                    ..Default::default()
                },
                records,
            ),
        }
    }

    fn not_found(&self) -> Refusal {
        (
            ErrorCode::GroupIdNotFound,
            format!("Group {} not found.", self.group_id),
        )
    }

    fn unknown_member(&self, member_id: &str) -> Refusal {
        (
            ErrorCode::UnknownMemberId,
            format!(
                "Member {member_id} is not a member of group {}.",
                self.group_id
            ),
        )
    }

    fn leave(
        &mut self,
        request: &ConsumerGroupHeartbeatRequest,
        topics: &dyn TopicLookup,
        records: &mut Vec<GroupRecord>,
    ) -> Result<ConsumerGroupHeartbeatResponse, Refusal> {
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
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: Some(member_id),
            member_epoch: request.member_epoch,
            ..Default::default()
        })
    }

    fn static_member_of(&self, instance_id: &str) -> Result<String, Refusal> {
        self.static_members.get(instance_id).cloned().ok_or((
            ErrorCode::UnknownMemberId,
            format!("Instance id {instance_id} is unknown."),
        ))
    }

    fn join_or_heartbeat(
        &mut self,
        request: &ConsumerGroupHeartbeatRequest,
        context: &RequestContext,
        now_ms: i64,
        topics: &dyn TopicLookup,
        config: &ConsumerGroupConfig,
        records: &mut Vec<GroupRecord>,
    ) -> Result<ConsumerGroupHeartbeatResponse, Refusal> {
        let joining = request.member_epoch == 0;
        if !joining && !self.exists() {
            return Err(self.not_found());
        }
        let is_known =
            !request.member_id.is_empty() && self.members.contains_key(&request.member_id);
        if self.members.len() as u64 >= u64::from(config.max_size) && !is_known {
            return Err((
                ErrorCode::GroupMaxSizeReached,
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
        let owned = request.topic_partitions.as_ref().map(|tps| {
            tps.iter()
                .map(|tp| (tp.topic_id.0, tp.partitions.clone()))
                .collect::<Vec<_>>()
        });

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
                    None => return Err(self.static_member_of(instance_id).unwrap_err()),
                    Some(previous_id) if joining && previous_id != member_id => {
                        let previous = &self.members[&previous_id];
                        if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                            return Err((
                                ErrorCode::UnreleasedInstanceId,
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
            (full_request || now.assigned != before.assigned).then(|| hb::Assignment {
                topic_partitions: now
                    .assigned
                    .iter()
                    .map(|(topic, parts)| hb::TopicPartitions {
                        topic_id: Uuid(*topic),
                        partitions: parts.iter().copied().collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: Some(member_id),
            member_epoch: now.member_epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment,
            ..Default::default()
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
    fn fence_member(
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
        let group_id = self.group_id.clone();
        let key = |member_id: &str| (group_id.clone(), member_id.to_string());
        let (g, m) = key(member_id);
        self.emit(
            records,
            GroupRecord::ConsumerGroupCurrentMemberAssignment(
                ConsumerGroupCurrentMemberAssignmentKey {
                    group_id: g.clone(),
                    member_id: m.clone(),
                    ..Default::default()
                },
                None,
            ),
        );
        self.emit(
            records,
            GroupRecord::ConsumerGroupTargetAssignmentMember(
                ConsumerGroupTargetAssignmentMemberKey {
                    group_id: g.clone(),
                    member_id: m.clone(),
                    ..Default::default()
                },
                None,
            ),
        );
        self.emit(
            records,
            GroupRecord::ConsumerGroupMemberMetadata(
                ConsumerGroupMemberMetadataKey {
                    group_id: g,
                    member_id: m,
                    ..Default::default()
                },
                None,
            ),
        );
    }

    fn cancel_timers(&mut self, member_id: &str) {
        self.timers.session.remove(member_id);
        self.timers.rebalance.remove(member_id);
    }

    fn emit(&mut self, records: &mut Vec<GroupRecord>, record: GroupRecord) {
        self.replay(&record);
        records.push(record);
    }

    /// Records that delete the whole group (DeleteGroups): only for an empty group.
    pub fn delete_records(&self) -> Result<Vec<GroupRecord>, ErrorCode> {
        if self.state() != GroupState::Empty {
            return Err(ErrorCode::NonEmptyGroup);
        }
        let group_id = self.group_id.clone();
        let mut records = Vec::new();
        for member_id in self.target.keys() {
            records.push(GroupRecord::ConsumerGroupTargetAssignmentMember(
                ConsumerGroupTargetAssignmentMemberKey {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    ..Default::default()
                },
                None,
            ));
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

    /// ConsumerGroupDescribe's entry for this group. `authorized_operations` is the handler's
    /// (i32::MIN when not asked for, as Kafka).
    pub fn describe(
        &self,
        config: &ConsumerGroupConfig,
        authorized_operations: i32,
    ) -> describe::DescribedGroup {
        let names: HashMap<TopicId, &str> = self
            .subscription_metadata
            .values()
            .map(|t| (t.id, t.name.as_str()))
            .collect();
        let to_wire = |assignment: &Assignment| describe::Assignment {
            topic_partitions: assignment
                .iter()
                .filter_map(|(topic, parts)| {
                    names.get(topic).map(|name| describe::TopicPartitions {
                        topic_id: Uuid(*topic),
                        topic_name: name.to_string(),
                        partitions: parts.iter().copied().collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        describe::DescribedGroup {
            group_id: self.group_id.clone(),
            group_state: self.state().name().to_string(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor(config).name().to_string(),
            members: self
                .members
                .values()
                .map(|m| describe::Member {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    assignment: to_wire(&m.assigned),
                    target_assignment: to_wire(&self.target_assignment(&m.member_id)),
                    ..Default::default()
                })
                .collect(),
            authorized_operations,
            ..Default::default()
        }
    }

    /// OffsetCommit's check for this group (Kafka's `ConsumerGroup.validateOffsetCommit`): a
    /// commit with a negative epoch (admin, or a consumer outside the group protocol) is
    /// accepted only while the group is empty; members of this protocol must use OffsetCommit
    /// v9+ (older versions carry a generation, not a member epoch) and their current epoch.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
        transactional: bool,
    ) -> Result<(), ErrorCode> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if !transactional && api_version < 9 {
            return Err(ErrorCode::UnsupportedVersion);
        }
        if member_epoch != member.member_epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }

    /// OffsetFetch's check when the request names a member (v9+): the member must exist and
    /// send its current epoch; without a member id and with a negative epoch anyone may fetch.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        let Some(member_id) = member_id else {
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(ErrorCode::UnknownMemberId)
            };
        };
        let member = self
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if member_epoch != member.member_epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
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

fn fenced_instance(member_id: &str, instance_id: &str, owner: &str) -> Refusal {
    (
        ErrorCode::FencedInstanceId,
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {owner}."),
    )
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| v.trim().is_empty())
}

fn invalid(message: &str) -> Refusal {
    (ErrorCode::InvalidRequest, message.to_string())
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (v0-1: an empty member id on join
/// asks the coordinator for one).
fn validate_request(
    request: &ConsumerGroupHeartbeatRequest,
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
        return Err((
            ErrorCode::InvalidRegularExpression,
            "SubscribedTopicRegex is not supported by this broker.".to_string(),
        ));
    }
    if let Some(name) = &request.server_assignor {
        let supported = Assignor::from_name(name).is_some_and(|a| config.assignors.contains(&a));
        if !supported {
            let names: Vec<&str> = config.assignors.iter().map(|a| a.name()).collect();
            return Err((
                ErrorCode::UnsupportedAssignor,
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
fn check_member_epoch(
    member: &Member,
    received: i32,
    owned: Option<&[(TopicId, Vec<i32>)]>,
) -> Result<(), Refusal> {
    let fenced =
        || {
            (
                ErrorCode::FencedMemberEpoch,
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

/// Kafka's `CurrentAssignmentBuilder`: the member's next assignment state towards `target`.
fn reconcile(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&[(TopicId, Vec<i32>)]>,
    partition_epoch: impl Fn(TopicId, i32) -> i32,
) -> Result<Member, Refusal> {
    // Whether the member still reports any of `revoking` (None: it did not say, so it might).
    let owns_any = |revoking: &Assignment| match owned {
        None => true,
        Some(owned) => owned.iter().any(|(topic, parts)| {
            revoking
                .get(topic)
                .is_some_and(|r| parts.iter().any(|p| r.contains(p)))
        }),
    };
    let next = |epoch: i32| -> Member {
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut incoming = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<&TopicId> = target.keys().chain(member.assigned.keys()).collect();
        for topic in topics {
            let empty = BTreeSet::new();
            let wanted = target.get(topic).unwrap_or(&empty);
            let current = member.assigned.get(topic).unwrap_or(&empty);
            let keep: BTreeSet<i32> = current.intersection(wanted).copied().collect();
            let give_up: BTreeSet<i32> = current.difference(&keep).copied().collect();
            let mut take: BTreeSet<i32> = wanted.difference(&keep).copied().collect();
            let before = take.len();
            take.retain(|&p| partition_epoch(*topic, p) == -1);
            unreleased |= take.len() != before;
            if !keep.is_empty() {
                assigned.insert(*topic, keep);
            }
            if !give_up.is_empty() {
                revoking.insert(*topic, give_up);
            }
            if !take.is_empty() {
                incoming.insert(*topic, take);
            }
        }
        let mut m = member.clone();
        if !revoking.is_empty() && owns_any(&revoking) {
            m.state = MemberState::UnrevokedPartitions;
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
            m.assigned = assigned;
            m.pending_revocation = revoking;
            return m;
        }
        for (topic, parts) in incoming {
            assigned.entry(topic).or_default().extend(parts);
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = target_epoch;
        m.assigned = assigned;
        m.pending_revocation = Assignment::new();
        m
    };
    match member.state {
        MemberState::Stable if member.member_epoch != target_epoch => Ok(next(member.member_epoch)),
        MemberState::Stable => Ok(member.clone()),
        MemberState::UnrevokedPartitions => {
            if owns_any(&member.pending_revocation) {
                Ok(member.clone())
            } else {
                Ok(next(member.member_epoch + 1))
            }
        }
        MemberState::UnreleasedPartitions => Ok(next(member.member_epoch)),
        MemberState::Unknown => {
            if owned.is_none_or(|o| !o.is_empty()) {
                return Err((
                    ErrorCode::FencedMemberEpoch,
                    "The consumer group member is in a unknown state. The member must abandon \
                     all its partitions and rejoin."
                        .to_string(),
                ));
            }
            Ok(next(target_epoch))
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

fn member_metadata_record(group_id: &str, member: &Member) -> GroupRecord {
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

fn current_assignment_record(group_id: &str, member: &Member) -> GroupRecord {
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

fn target_member_record(group_id: &str, member_id: &str, assignment: &Assignment) -> GroupRecord {
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

fn target_epoch_record(group_id: &str, epoch: i32) -> GroupRecord {
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

fn group_epoch_record(group_id: &str, epoch: i32) -> GroupRecord {
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

fn partition_metadata_record(
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

#[cfg(test)]
mod tests;
