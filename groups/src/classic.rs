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

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use futures::channel::oneshot;
use wire::generated::join_group_response::JoinGroupResponseMember;
use wire::generated::{JoinGroupResponse, SyncGroupResponse};
use wire::group_records::group_metadata_value::MemberMetadata;
use wire::group_records::GroupMetadataValue;
use wire::ErrorCode;

/// How long a member id handed out with MEMBER_ID_REQUIRED (KIP-394) waits for its join
/// before it is forgotten (Kafka keeps it for the session timeout).
const PENDING_MEMBER_GRACE_MS: u64 = 30_000;

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

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinGroupResponse>>,
    sync_waiter: Option<oneshot::Sender<SyncGroupResponse>>,
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

    fn rebalance_timeout(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Protocols every member supports, in the order of the first member's preference.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let mut candidates: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for member in members {
            candidates.retain(|c| member.protocols.iter().any(|(n, _)| n == c));
        }
        candidates
    }

    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && self
                .candidate_protocols()
                .iter()
                .any(|c| protocols.iter().any(|(n, _)| n == c))
    }

    /// Kafka's vote: each member votes for its most preferred candidate protocol.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n))
            {
                if let Some(vote) = votes.iter_mut().find(|(c, _)| c == name) {
                    vote.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes.into_iter().find(|(_, n)| *n == best).map(|(c, _)| c)
    }

    fn new_member_id(client_id: &str) -> String {
        let b = metadata::random_topic_id();
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{client_id}-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    fn join_error(member_id: &str, code: ErrorCode) -> JoinGroupResponse {
        JoinGroupResponse {
            error_code: code.code(),
            generation_id: -1,
            member_id: member_id.to_string(),
            protocol_name: None,
            ..Default::default()
        }
    }

    /// JoinGroup. `now` is monotonic ms; `max_size` is `group.max.size`;
    /// `initial_delay_ms` is `group.initial.rebalance.delay.ms`.
    pub fn join(
        &mut self,
        args: JoinArgs,
        now: u64,
        max_size: usize,
        initial_delay_ms: u64,
    ) -> Step<JoinGroupResponse> {
        if self.state() == State::Dead {
            return Step::Now(Self::join_error(
                &args.member_id,
                ErrorCode::CoordinatorNotAvailable,
            ));
        }
        if !self.supports(&args.protocol_type, &args.protocols) {
            return Step::Now(Self::join_error(
                &args.member_id,
                ErrorCode::InconsistentGroupProtocol,
            ));
        }
        // Static member: the instance id names the member, whatever member id it had.
        if let Some(instance) = args.group_instance_id.clone() {
            let known = self.static_members.get(&instance).cloned();
            match known {
                Some(old_id) => {
                    if !args.member_id.is_empty() && args.member_id != old_id {
                        return Step::Now(Self::join_error(
                            &args.member_id,
                            ErrorCode::FencedInstanceId,
                        ));
                    }
                    return self.rejoin_static(old_id, args, now);
                }
                None => {
                    if !args.member_id.is_empty() {
                        return Step::Now(Self::join_error(
                            &args.member_id,
                            ErrorCode::UnknownMemberId,
                        ));
                    }
                    if self.members.len() >= max_size {
                        return Step::Now(Self::join_error("", ErrorCode::GroupMaxSizeReached));
                    }
                    let member_id = Self::new_member_id(&args.client_id);
                    self.static_members.insert(instance, member_id.clone());
                    return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
                }
            }
        }
        if args.member_id.is_empty() {
            if self.members.len() + self.pending.len() >= max_size {
                return Step::Now(Self::join_error("", ErrorCode::GroupMaxSizeReached));
            }
            let member_id = Self::new_member_id(&args.client_id);
            if args.require_known_member_id {
                self.pending.insert(
                    member_id.clone(),
                    now + PENDING_MEMBER_GRACE_MS.max(args.session_timeout_ms.max(0) as u64),
                );
                return Step::Now(Self::join_error(&member_id, ErrorCode::MemberIdRequired));
            }
            return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
        }
        if self.pending.remove(&args.member_id).is_some() {
            if self.members.len() >= max_size {
                return Step::Now(Self::join_error(
                    &args.member_id,
                    ErrorCode::GroupMaxSizeReached,
                ));
            }
            let member_id = args.member_id.clone();
            return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
        }
        if !self.members.contains_key(&args.member_id) {
            return Step::Now(Self::join_error(
                &args.member_id,
                ErrorCode::UnknownMemberId,
            ));
        }
        self.rejoin_known(args, now)
    }

    fn rejoin_static(
        &mut self,
        old_id: String,
        args: JoinArgs,
        now: u64,
    ) -> Step<JoinGroupResponse> {
        let Some(mut member) = self.members.remove(&old_id) else {
            // Known instance without a member (should not happen): treat as new.
            let member_id = Self::new_member_id(&args.client_id);
            if let Some(instance) = &args.group_instance_id {
                self.static_members
                    .insert(instance.clone(), member_id.clone());
            }
            return self.add_member_and_rebalance(member_id, args, now, 0);
        };
        let new_id = Self::new_member_id(&args.client_id);
        // The old incarnation's waiting calls are fenced.
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(Self::join_error(&old_id, ErrorCode::FencedInstanceId));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(SyncGroupResponse {
                error_code: ErrorCode::FencedInstanceId.code(),
                ..Default::default()
            });
        }
        let protocols_changed = member.protocols != args.protocols;
        member.member_id = new_id.clone();
        member.client_id = args.client_id.clone();
        member.client_host = args.client_host.clone();
        member.session_timeout_ms = args.session_timeout_ms;
        member.rebalance_timeout_ms = args.rebalance_timeout_ms;
        member.heartbeat_deadline = now + args.session_timeout_ms.max(0) as u64;
        if let Some(instance) = &args.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        self.dirty = true;
        match self.state() {
            State::Stable if !protocols_changed => {
                // KIP-345: a static member that comes back gets the current generation with no
                // rebalance; a returning leader is told not to assign again (KIP-814).
                let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                let mut response = self.join_response(&new_id, is_leader);
                response.skip_assignment = is_leader;
                Step::Now(response)
            }
            State::PreparingRebalance
            | State::CompletingRebalance
            | State::Stable
            | State::Empty => self.rejoin_known(
                JoinArgs {
                    member_id: new_id,
                    ..args
                },
                now,
            ),
            State::Dead => Step::Now(Self::join_error(
                &new_id,
                ErrorCode::CoordinatorNotAvailable,
            )),
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        args: JoinArgs,
        now: u64,
        initial_delay_ms: u64,
    ) -> Step<JoinGroupResponse> {
        let (sender, receiver) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        self.next_seq += 1;
        self.members.insert(
            member_id.clone(),
            Member {
                member_id: member_id.clone(),
                group_instance_id: args.group_instance_id.clone(),
                client_id: args.client_id,
                client_host: args.client_host,
                session_timeout_ms: args.session_timeout_ms,
                rebalance_timeout_ms: args.rebalance_timeout_ms,
                protocols: args.protocols,
                assignment: Bytes::new(),
                join_waiter: Some(sender),
                sync_waiter: None,
                heartbeat_deadline: now + args.session_timeout_ms.max(0) as u64,
                joined_seq: self.next_seq,
            },
        );
        if self.leader.is_none() {
            self.leader = Some(member_id);
        }
        match self.state() {
            State::Empty => {
                self.prepare_rebalance(now);
                // Kafka's InitialDelayedJoin: an empty group waits for more members.
                self.initial_delay_until = now + initial_delay_ms;
            }
            State::PreparingRebalance => {
                if self.initial_delay_until > now {
                    // Each new member extends the initial delay, within the rebalance timeout.
                    self.initial_delay_until =
                        (now + initial_delay_ms).min(self.rebalance_deadline);
                }
            }
            State::CompletingRebalance | State::Stable => self.prepare_rebalance(now),
            State::Dead => {}
        }
        self.maybe_complete_join(now);
        Step::Wait(receiver)
    }

    fn rejoin_known(&mut self, args: JoinArgs, now: u64) -> Step<JoinGroupResponse> {
        let state = self.state();
        let member_id = args.member_id.clone();
        let member = self.members.get_mut(&member_id).expect("caller checked");
        member.heartbeat_deadline = now + args.session_timeout_ms.max(0) as u64;
        member.session_timeout_ms = args.session_timeout_ms;
        member.rebalance_timeout_ms = args.rebalance_timeout_ms;
        let protocols_changed = !args.protocols.is_empty() && member.protocols != args.protocols;
        if !args.protocols.is_empty() {
            member.protocols = args.protocols;
        }
        match state {
            State::PreparingRebalance => {
                let (sender, receiver) = oneshot::channel();
                if let Some(old) = member.join_waiter.replace(sender) {
                    let _ = old.send(Self::join_error(&member_id, ErrorCode::RebalanceInProgress));
                }
                self.maybe_complete_join(now);
                Step::Wait(receiver)
            }
            State::CompletingRebalance if !protocols_changed => {
                // The join response was lost: send it again.
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                Step::Now(self.join_response(&member_id, is_leader))
            }
            State::Stable
                if !protocols_changed && self.leader.as_deref() != Some(member_id.as_str()) =>
            {
                Step::Now(self.join_response(&member_id, false))
            }
            _ => {
                // The leader rejoining a stable group, or changed metadata: rebalance.
                let (sender, receiver) = oneshot::channel();
                member.join_waiter = Some(sender);
                self.prepare_rebalance(now);
                self.maybe_complete_join(now);
                Step::Wait(receiver)
            }
        }
    }

    fn prepare_rebalance(&mut self, now: u64) {
        if self.state() == State::CompletingRebalance {
            // Pending syncs learn that a new rebalance started.
            for member in self.members.values_mut() {
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(SyncGroupResponse {
                        error_code: ErrorCode::RebalanceInProgress.code(),
                        ..Default::default()
                    });
                }
            }
        }
        self.set_state(State::PreparingRebalance);
        self.rebalance_deadline = now + self.rebalance_timeout();
        self.initial_delay_until = 0;
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    /// Ends the join phase when everybody has rejoined (after any initial delay) or the
    /// rebalance deadline passed (removing whoever has not rejoined).
    fn maybe_complete_join(&mut self, now: u64) {
        if self.state() != State::PreparingRebalance {
            return;
        }
        let deadline_passed = now >= self.rebalance_deadline;
        if !(deadline_passed || (self.all_joined() && now >= self.initial_delay_until)) {
            return;
        }
        if deadline_passed {
            let gone: Vec<String> = self
                .members
                .values()
                .filter(|m| m.join_waiter.is_none())
                .map(|m| m.member_id.clone())
                .collect();
            for id in gone {
                self.remove_member(&id);
            }
            self.pending.clear();
        }
        self.generation += 1;
        self.dirty = true;
        if self.members.is_empty() {
            // Kafka keeps the protocol type of a group that emptied (it is still a
            // "consumer" group, not a simple one).
            self.protocol_name = None;
            self.leader = None;
            self.set_state(State::Empty);
            return;
        }
        self.protocol_name = self.select_protocol();
        if self
            .leader
            .as_ref()
            .is_none_or(|leader| !self.members.contains_key(leader))
        {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.joined_seq)
                .map(|m| m.member_id.clone());
        }
        self.set_state(State::CompletingRebalance);
        self.sync_deadline = now + self.rebalance_timeout();
        let leader = self.leader.clone();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = leader.as_deref() == Some(id.as_str());
            let response = self.join_response(&id, is_leader);
            let member = self.members.get_mut(&id).expect("listed");
            member.assignment = Bytes::new();
            member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(response);
            }
        }
    }

    fn join_response(&self, member_id: &str, is_leader: bool) -> JoinGroupResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if is_leader {
            let mut members: Vec<&Member> = self.members.values().collect();
            members.sort_by_key(|m| m.joined_seq);
            members
                .into_iter()
                .map(|m| JoinGroupResponseMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata(&protocol),
                    ..Default::default()
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            error_code: 0,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
            ..Default::default()
        }
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

    /// Checks a member's identity for Heartbeat, SyncGroup, OffsetCommit.
    fn check_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        if let Some(instance) = group_instance_id {
            match self.static_members.get(instance) {
                Some(known) if known != member_id => return Err(ErrorCode::FencedInstanceId),
                _ => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        Ok(())
    }

    /// SyncGroup. `Ok(Some(assignments))` from the leader in CompletingRebalance: the
    /// coordinator persists the group, then calls `assignments_persisted`.
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now: u64,
    ) -> Step<SyncGroupResponse> {
        let error = |code: ErrorCode| {
            Step::Now(SyncGroupResponse {
                error_code: code.code(),
                ..Default::default()
            })
        };
        if self.state() == State::Dead {
            return error(ErrorCode::CoordinatorNotAvailable);
        }
        if let Err(code) = self.check_member(member_id, group_instance_id) {
            return error(code);
        }
        if generation_id != self.generation {
            return error(ErrorCode::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != self.protocol_name.as_deref())
        {
            return error(ErrorCode::InconsistentGroupProtocol);
        }
        match self.state() {
            State::Empty | State::Dead => error(ErrorCode::UnknownMemberId),
            State::PreparingRebalance => error(ErrorCode::RebalanceInProgress),
            State::Stable => {
                let member = self.members.get_mut(member_id).expect("checked");
                member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
                Step::Now(self.sync_response(member_id))
            }
            State::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                let member = self.members.get_mut(member_id).expect("checked");
                member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
                member.sync_waiter = Some(sender);
                if self.leader.as_deref() == Some(member_id) {
                    for member in self.members.values_mut() {
                        member.assignment = Bytes::new();
                    }
                    for (id, assignment) in assignments {
                        if let Some(member) = self.members.get_mut(&id) {
                            member.assignment = assignment;
                        }
                    }
                    self.dirty = true;
                }
                Step::Wait(receiver)
            }
        }
    }

    fn sync_response(&self, member_id: &str) -> SyncGroupResponse {
        SyncGroupResponse {
            error_code: 0,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    /// After the leader's assignments of `generation` are durable: Stable, and every waiting
    /// member gets its assignment. A failed write restarts the rebalance (Kafka's rule).
    pub fn assignments_persisted(&mut self, generation: i32, ok: bool, now: u64) {
        if self.state() != State::CompletingRebalance || self.generation != generation {
            return;
        }
        if !ok {
            for member in self.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(SyncGroupResponse {
                        error_code: ErrorCode::CoordinatorNotAvailable.code(),
                        ..Default::default()
                    });
                }
            }
            self.prepare_rebalance(now);
            return;
        }
        self.set_state(State::Stable);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let response = self.sync_response(&id);
            if let Some(waiter) = self.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                let _ = waiter.send(response);
            }
        }
    }

    /// Whether the leader has synced in this CompletingRebalance (its assignments await
    /// persistence).
    pub fn leader_synced(&self) -> bool {
        self.state() == State::CompletingRebalance
            && self
                .leader
                .as_ref()
                .and_then(|l| self.members.get(l))
                .is_some_and(|l| l.sync_waiter.is_some())
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: u64,
    ) -> ErrorCode {
        match self.state() {
            State::Dead => return ErrorCode::CoordinatorNotAvailable,
            State::Empty => return ErrorCode::UnknownMemberId,
            _ => {}
        }
        if let Err(code) = self.check_member(member_id, group_instance_id) {
            return code;
        }
        if generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        let member = self.members.get_mut(member_id).expect("checked");
        member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
        if self.state() == State::PreparingRebalance {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }

    /// LeaveGroup of one member (by member id, or by instance id for a static member).
    pub fn leave(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        now: u64,
    ) -> ErrorCode {
        if self.state() == State::Dead {
            return ErrorCode::CoordinatorNotAvailable;
        }
        let id = match group_instance_id {
            Some(instance) => match self.static_members.get(instance) {
                Some(known) if member_id.is_empty() || known == member_id => known.clone(),
                Some(_) => return ErrorCode::FencedInstanceId,
                None => return ErrorCode::UnknownMemberId,
            },
            None => {
                if self.pending.remove(member_id).is_some() {
                    self.maybe_complete_join(now);
                    return ErrorCode::None;
                }
                member_id.to_string()
            }
        };
        let Some(mut member) = self.remove_member(&id) else {
            return ErrorCode::UnknownMemberId;
        };
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(Self::join_error(&id, ErrorCode::UnknownMemberId));
        }
        self.after_removal(now);
        ErrorCode::None
    }

    fn after_removal(&mut self, now: u64) {
        match self.state() {
            State::Stable | State::CompletingRebalance => {
                if self.members.is_empty() && self.pending.is_empty() {
                    self.prepare_rebalance(now);
                    self.maybe_complete_join(now);
                } else {
                    self.prepare_rebalance(now);
                }
            }
            State::PreparingRebalance => self.maybe_complete_join(now),
            _ => {}
        }
    }

    /// Deadlines: expired sessions, the end of a join phase, a sync that never came.
    pub fn tick(&mut self, now: u64) {
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                // Kafka keeps a member that waits for its join or sync answer alive.
                m.join_waiter.is_none() && m.sync_waiter.is_none() && m.heartbeat_deadline <= now
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            tracing::info!(member = %id, "group member session expired");
            self.remove_member(id);
        }
        if !expired.is_empty() {
            self.after_removal(now);
        }
        match self.state() {
            State::PreparingRebalance => self.maybe_complete_join(now),
            State::CompletingRebalance if now >= self.sync_deadline && !self.leader_synced() => {
                // Members that never synced are gone; the rest rebalance again.
                let gone: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.sync_waiter.is_none())
                    .map(|m| m.member_id.clone())
                    .collect();
                for id in gone {
                    self.remove_member(&id);
                }
                self.prepare_rebalance(now);
                self.maybe_complete_join(now);
            }
            _ => {}
        }
    }

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

    /// DeleteGroups / expiry: no member may come back to this incarnation.
    pub fn mark_dead(&mut self) {
        self.set_state(State::Dead);
    }
}

pub use wire::consumer_protocol::subscribed_topics;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(member_id: &str, client: &str) -> JoinArgs {
        JoinArgs {
            member_id: member_id.into(),
            group_instance_id: None,
            client_id: client.into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            require_known_member_id: true,
        }
    }

    fn now_response(step: Step<JoinGroupResponse>) -> JoinGroupResponse {
        match step {
            Step::Now(r) => r,
            Step::Wait(_) => panic!("expected an immediate answer"),
        }
    }

    fn waited<T>(step: Step<T>) -> oneshot::Receiver<T> {
        match step {
            Step::Wait(r) => r,
            Step::Now(_) => panic!("expected to wait"),
        }
    }

    fn join_two(group: &mut ClassicGroup) -> (String, String) {
        let first = now_response(group.join(args("", "a"), 0, 100, 100));
        assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
        assert!(first.member_id.starts_with("a-"));
        let a = first.member_id;
        let b = now_response(group.join(args("", "b"), 0, 100, 100)).member_id;
        let mut ra = waited(group.join(args(&a, "a"), 1, 100, 100));
        let mut rb = waited(group.join(args(&b, "b"), 2, 100, 100));
        assert!(
            ra.try_recv().unwrap().is_none(),
            "initial delay holds the join"
        );
        group.tick(200);
        let ja = ra.try_recv().unwrap().unwrap();
        let jb = rb.try_recv().unwrap().unwrap();
        assert_eq!(ja.generation_id, 1);
        assert_eq!(ja.leader, a);
        assert_eq!(ja.members.len(), 2, "leader sees every member");
        assert!(jb.members.is_empty());
        assert_eq!(group.state(), State::CompletingRebalance);
        (a, b)
    }

    #[test]
    fn member_id_required_then_join_sync_stable() {
        let mut group = ClassicGroup::new();
        let (a, b) = join_two(&mut group);
        let mut sb = waited(group.sync(&b, None, 1, None, None, vec![], 300));
        let mut sa = waited(group.sync(
            &a,
            None,
            1,
            Some("consumer"),
            Some("range"),
            vec![
                (a.clone(), Bytes::from_static(b"A")),
                (b.clone(), Bytes::from_static(b"B")),
            ],
            300,
        ));
        assert!(group.leader_synced());
        group.assignments_persisted(1, true, 301);
        assert_eq!(group.state(), State::Stable);
        assert_eq!(&sa.try_recv().unwrap().unwrap().assignment[..], b"A");
        assert_eq!(&sb.try_recv().unwrap().unwrap().assignment[..], b"B");
        assert_eq!(group.heartbeat(&a, None, 1, 400), ErrorCode::None);
        assert_eq!(
            group.heartbeat(&a, None, 0, 400),
            ErrorCode::IllegalGeneration
        );
        assert_eq!(
            group.heartbeat("x", None, 1, 400),
            ErrorCode::UnknownMemberId
        );
    }

    #[test]
    fn leave_and_expiry_rebalance() {
        let mut group = ClassicGroup::new();
        let (a, b) = join_two(&mut group);
        let _sa = group.sync(&a, None, 1, None, None, vec![], 300);
        group.assignments_persisted(1, true, 300);
        assert_eq!(group.leave(&b, None, 400), ErrorCode::None);
        assert_eq!(group.state(), State::PreparingRebalance);
        assert_eq!(
            group.heartbeat(&a, None, 1, 400),
            ErrorCode::RebalanceInProgress
        );
        let mut ra = waited(group.join(args(&a, "a"), 500, 100, 100));
        let ja = ra.try_recv().unwrap().unwrap();
        assert_eq!(ja.generation_id, 2);
        // a never syncs nor heartbeats: the sync deadline passes and then its session.
        group.tick(500 + 30_001);
        group.tick(500 + 30_001 + 40_000);
        assert_eq!(group.state(), State::Empty);
        assert_eq!(group.member_count(), 0);
    }

    #[test]
    fn static_member_rejoins_without_rebalance() {
        let mut group = ClassicGroup::new();
        let mut s = args("", "s");
        s.group_instance_id = Some("i1".into());
        let mut r = waited(group.join(s.clone(), 0, 100, 0));
        let j = r.try_recv().unwrap().unwrap();
        let _sync = group.sync(
            &j.member_id,
            Some("i1"),
            1,
            None,
            None,
            vec![(j.member_id.clone(), Bytes::from_static(b"X"))],
            1,
        );
        group.assignments_persisted(1, true, 1);
        assert_eq!(group.state(), State::Stable);
        // Restart: same instance id, empty member id.
        let again = now_response(group.join(s.clone(), 10, 100, 0));
        assert_eq!(again.error_code, 0);
        assert_eq!(again.generation_id, 1, "no rebalance");
        assert_ne!(again.member_id, j.member_id);
        assert_eq!(group.state(), State::Stable);
        // The old incarnation is fenced.
        assert_eq!(
            group.heartbeat(&j.member_id, Some("i1"), 1, 11),
            ErrorCode::FencedInstanceId
        );
        let sync = group.sync(&again.member_id, Some("i1"), 1, None, None, vec![], 12);
        match sync {
            Step::Now(r) => assert_eq!(&r.assignment[..], b"X"),
            Step::Wait(_) => panic!("stable group answers at once"),
        }
    }

    #[test]
    fn protocol_selection_and_inconsistency() {
        let mut group = ClassicGroup::new();
        let mut a = args("", "a");
        a.require_known_member_id = false;
        a.protocols = vec![
            ("range".into(), Bytes::new()),
            ("roundrobin".into(), Bytes::new()),
        ];
        let _ = group.join(a.clone(), 0, 100, 10);
        let mut b = a.clone();
        b.protocols = vec![("roundrobin".into(), Bytes::new())];
        let _ = group.join(b, 0, 100, 10);
        group.tick(20);
        assert_eq!(group.protocol_name.as_deref(), Some("roundrobin"));
        let mut c = a.clone();
        c.protocols = vec![("sticky".into(), Bytes::new())];
        let r = now_response(group.join(c, 2, 100, 0));
        assert_eq!(r.error_code, ErrorCode::InconsistentGroupProtocol.code());
    }

    #[test]
    fn subscription_topics_are_read() {
        let mut buf = vec![0u8, 1, 0, 0, 0, 2];
        for t in ["ab", "c"] {
            buf.extend_from_slice(&(t.len() as i16).to_be_bytes());
            buf.extend_from_slice(t.as_bytes());
        }
        buf.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(
            subscribed_topics(&buf),
            vec!["ab".to_string(), "c".to_string()]
        );
        assert!(subscribed_topics(&[0xff]).is_empty());
        assert!(subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_empty());
    }
}
