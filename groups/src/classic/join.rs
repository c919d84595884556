//! The join phase of a classic group: JoinGroup for new, known and static members, and the
//! end of the phase (PreparingRebalance -> CompletingRebalance) when all have rejoined or the
//! rebalance timeout passed.

use super::{
    ClassicGroup, GroupError, JoinArgs, JoinRefused, JoinReply, Joined, JoinedMember, Member,
    State, Step,
};
use bytes::Bytes;
use futures::channel::oneshot;

/// How long a member id handed out with MEMBER_ID_REQUIRED (KIP-394) waits for its join
/// before it is forgotten (Kafka keeps it for the session timeout).
const PENDING_MEMBER_GRACE_MS: u64 = 30_000;

impl ClassicGroup {
    fn rebalance_timeout(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as u64)
            .max()
            .unwrap_or(0)
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

    pub(super) fn join_error(member_id: &str, error: GroupError) -> JoinReply {
        Err(JoinRefused {
            member_id: member_id.to_string(),
            error,
        })
    }

    /// JoinGroup. `now` is monotonic ms; `max_size` is `group.max.size`;
    /// `initial_delay_ms` is `group.initial.rebalance.delay.ms`.
    pub fn join(
        &mut self,
        args: JoinArgs,
        now: u64,
        max_size: usize,
        initial_delay_ms: u64,
    ) -> Step<JoinReply> {
        if self.state() == State::Dead {
            return Step::Now(Self::join_error(
                &args.member_id,
                GroupError::CoordinatorNotAvailable,
            ));
        }
        if !self.supports(&args.protocol_type, &args.protocols) {
            return Step::Now(Self::join_error(
                &args.member_id,
                GroupError::InconsistentGroupProtocol,
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
                            GroupError::FencedInstanceId,
                        ));
                    }
                    return self.rejoin_static(old_id, args, now);
                }
                None => {
                    if !args.member_id.is_empty() {
                        return Step::Now(Self::join_error(
                            &args.member_id,
                            GroupError::UnknownMemberId,
                        ));
                    }
                    if self.members.len() >= max_size {
                        return Step::Now(Self::join_error("", GroupError::GroupMaxSizeReached));
                    }
                    let member_id = Self::new_member_id(&args.client_id);
                    self.static_members.insert(instance, member_id.clone());
                    return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
                }
            }
        }
        if args.member_id.is_empty() {
            if self.members.len() + self.pending.len() >= max_size {
                return Step::Now(Self::join_error("", GroupError::GroupMaxSizeReached));
            }
            let member_id = Self::new_member_id(&args.client_id);
            if args.require_known_member_id {
                self.pending.insert(
                    member_id.clone(),
                    now + PENDING_MEMBER_GRACE_MS.max(args.session_timeout_ms.max(0) as u64),
                );
                return Step::Now(Self::join_error(&member_id, GroupError::MemberIdRequired));
            }
            return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
        }
        if self.pending.remove(&args.member_id).is_some() {
            if self.members.len() >= max_size {
                return Step::Now(Self::join_error(
                    &args.member_id,
                    GroupError::GroupMaxSizeReached,
                ));
            }
            let member_id = args.member_id.clone();
            return self.add_member_and_rebalance(member_id, args, now, initial_delay_ms);
        }
        if !self.members.contains_key(&args.member_id) {
            return Step::Now(Self::join_error(
                &args.member_id,
                GroupError::UnknownMemberId,
            ));
        }
        self.rejoin_known(args, now)
    }

    fn rejoin_static(&mut self, old_id: String, args: JoinArgs, now: u64) -> Step<JoinReply> {
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
            let _ = waiter.send(Self::join_error(&old_id, GroupError::FencedInstanceId));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(Err(GroupError::FencedInstanceId));
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
                let mut joined = self.joined(&new_id, is_leader);
                joined.skip_assignment = is_leader;
                Step::Now(Ok(joined))
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
                GroupError::CoordinatorNotAvailable,
            )),
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        args: JoinArgs,
        now: u64,
        initial_delay_ms: u64,
    ) -> Step<JoinReply> {
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

    fn rejoin_known(&mut self, args: JoinArgs, now: u64) -> Step<JoinReply> {
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
                    let _ = old.send(Self::join_error(
                        &member_id,
                        GroupError::RebalanceInProgress,
                    ));
                }
                self.maybe_complete_join(now);
                Step::Wait(receiver)
            }
            State::CompletingRebalance if !protocols_changed => {
                // The join response was lost: send it again.
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                Step::Now(Ok(self.joined(&member_id, is_leader)))
            }
            State::Stable
                if !protocols_changed && self.leader.as_deref() != Some(member_id.as_str()) =>
            {
                Step::Now(Ok(self.joined(&member_id, false)))
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

    pub(super) fn prepare_rebalance(&mut self, now: u64) {
        if self.state() == State::CompletingRebalance {
            // Pending syncs learn that a new rebalance started.
            for member in self.members.values_mut() {
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(Err(GroupError::RebalanceInProgress));
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
    pub(super) fn maybe_complete_join(&mut self, now: u64) {
        if self.state() != State::PreparingRebalance {
            return;
        }
        let deadline_passed = now >= self.rebalance_deadline;
        if !(deadline_passed || (self.all_joined() && now >= self.initial_delay_until)) {
            return;
        }
        if deadline_passed {
            self.remove_members_where(|m| m.join_waiter.is_none());
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
            let joined = self.joined(&id, is_leader);
            let member = self.members.get_mut(&id).expect("listed");
            member.assignment = Bytes::new();
            member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(Ok(joined));
            }
        }
    }

    fn joined(&self, member_id: &str, is_leader: bool) -> Joined {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if is_leader {
            let mut members: Vec<&Member> = self.members.values().collect();
            members.sort_by_key(|m| m.joined_seq);
            members
                .into_iter()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        Joined {
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
            skip_assignment: false,
        }
    }
}
