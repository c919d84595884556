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
//!
//! The group's state and its queries live here; the heartbeat state machine in `heartbeat`,
//! its request checks in `request_checks`, Kafka's `CurrentAssignmentBuilder` in `reconcile`,
//! session and rebalance deadlines in `timers`, the records it writes in `record_builders`
//! and their replay in `replay`, ConsumerGroupDescribe in `describe` and the offset APIs'
//! member checks in `offset_checks`.

mod describe;
mod heartbeat;
mod offset_checks;
mod reconcile;
mod record_builders;
mod replay;
mod request_checks;
mod timers;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::assignor::{Assignment, Assignor, TopicId, TopicSpec};
use crate::GroupError;
pub use describe::{DescribedMember, Description, NamedPartitions};
use timers::Timers;

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

/// What a ConsumerGroupHeartbeat asks (the api decodes the request into this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    /// 0 joins, -1 leaves, -2 leaves for now (a static member).
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns; `None` when this heartbeat does not say.
    pub topic_partitions: Option<Vec<(TopicId, Vec<i32>)>>,
}

impl Default for HeartbeatRequest {
    fn default() -> Self {
        HeartbeatRequest {
            group_id: String::new(),
            member_id: String::new(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
        }
    }
}

/// A ConsumerGroupHeartbeat's answer to a member that stays, joins or leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeated {
    pub member_id: String,
    pub member_epoch: i32,
    /// 0 for a member that left.
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment, when it changed or the request was a full one.
    pub assignment: Option<Assignment>,
}

/// What a ConsumerGroupHeartbeat gets.
pub type HeartbeatReply = Result<Heartbeated, Refusal>;

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

/// A refused request: the error and the message Kafka's exception carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub error: GroupError,
    pub message: String,
}

impl Refusal {
    pub fn new(error: GroupError, message: String) -> Refusal {
        Refusal { error, message }
    }
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
}

#[cfg(test)]
mod tests;
