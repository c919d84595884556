//! A classic consumer group's membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):
//! Kafka's ClassicGroup state machine, Empty -> PreparingRebalance -> CompletingRebalance ->
//! Stable, with KIP-394 (member ids handed out before the join), KIP-345 (static members) and
//! the initial rebalance delay.
//!
//! The state machine is synchronous and takes the time as an argument (`now`, monotonic ms),
//! so it never waits: a JoinGroup or SyncGroup that must wait for the rest of the group gets a
//! oneshot receiver that completes when the group's state moves on (a later join, sync,
//! leave, or a deadline found by `tick`). The coordinator persists what it is told to
//! (`Persist`) in `__consumer_offsets` before answering.
//!
//! The group and its members live here; the join phase in `join` (with the protocol vote in
//! `protocol_selection`), the sync phase in `sync`, heartbeats, leaves and session expiry in
//! `session`, the `__consumer_offsets` record in `record`, and what the offset APIs and
//! DeleteGroups require of the group in `offset_checks`.

mod join;
mod offset_checks;
mod protocol_selection;
mod record;
mod session;
mod sync;

use std::collections::{BTreeMap, HashMap};

pub use crate::GroupError;
use bytes::Bytes;
use futures::channel::oneshot;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum State {
    #[default]
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    /// Kafka's names (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// What a JoinGroup asks, with the connection's client id and host.
#[derive(Clone, Debug)]
pub struct JoinArgs {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394: v4+ clients accept MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

/// A member as the leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// Its metadata for the group's protocol.
    pub metadata: Bytes,
}

/// A JoinGroup that got into the group's current generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Joined {
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member, for the leader; empty for the others.
    pub members: Vec<JoinedMember>,
    /// KIP-814: a returning static leader must not assign again.
    pub skip_assignment: bool,
}

/// A refused JoinGroup, with the member id the answer carries (the request's, the one handed
/// out with MEMBER_ID_REQUIRED, or none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRefused {
    pub member_id: String,
    pub error: GroupError,
}

/// What a JoinGroup gets.
pub type JoinReply = Result<Joined, JoinRefused>;

/// A SyncGroup's answer: the member's assignment in the group's protocol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Synced {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// What a SyncGroup gets.
pub type SyncReply = Result<Synced, GroupError>;

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinReply>>,
    sync_waiter: Option<oneshot::Sender<SyncReply>>,
    heartbeat_deadline: u64,
    joined_seq: u64,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }
}

/// What a join or sync needs from the coordinator.
pub enum Step<T> {
    /// Answer now.
    Now(T),
    /// Answer when the receiver completes.
    Wait(oneshot::Receiver<T>),
}

#[derive(Default)]
pub struct ClassicGroup {
    state: State,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// KIP-394 member ids handed out and not yet used, with their deadline.
    pending: HashMap<String, u64>,
    static_members: HashMap<String, String>,
    next_seq: u64,
    /// PreparingRebalance: when the join phase ends whoever has not rejoined.
    rebalance_deadline: u64,
    /// PreparingRebalance of an empty group: the join phase lasts at least until here.
    initial_delay_until: u64,
    /// CompletingRebalance: when members that have not synced are removed.
    sync_deadline: u64,
    /// Set when the group changed in a way that must be written to `__consumer_offsets`.
    dirty: bool,
}

impl ClassicGroup {
    pub fn new() -> ClassicGroup {
        ClassicGroup::default()
    }

    pub fn state(&self) -> State {
        self.state
    }

    fn set_state(&mut self, state: State) {
        self.state = state;
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// Whether the group needs the coordinator's timer (members or a phase with a deadline).
    pub fn is_live(&self) -> bool {
        !self.members.is_empty() || !self.pending.is_empty()
    }

    /// Takes the "must be persisted" flag.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.joined_seq)
                .map(|m| m.member_id.clone());
        }
        self.dirty = true;
        Some(member)
    }

    /// Removes the members that missed a phase's deadline (`gone` picks them).
    fn remove_members_where(&mut self, gone: impl Fn(&Member) -> bool) {
        let ids: Vec<String> = self
            .members
            .values()
            .filter(|m| gone(m))
            .map(|m| m.member_id.clone())
            .collect();
        for id in ids {
            self.remove_member(&id);
        }
    }

    /// Checks a member's identity for Heartbeat, SyncGroup, OffsetCommit.
    fn check_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = group_instance_id {
            match self.static_members.get(instance) {
                Some(known) if known != member_id => return Err(GroupError::FencedInstanceId),
                _ => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    /// DeleteGroups / expiry: no member may come back to this incarnation.
    pub fn mark_dead(&mut self) {
        self.set_state(State::Dead);
    }
}

pub use wire::consumer_protocol::subscribed_topics;

#[cfg(test)]
mod tests;
