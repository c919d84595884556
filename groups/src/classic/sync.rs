//! The sync phase of a classic group: SyncGroup, and Stable once the leader's assignments
//! are durable.

use super::{ClassicGroup, GroupError, State, Step, SyncReply, Synced};
use bytes::Bytes;
use futures::channel::oneshot;

impl ClassicGroup {
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
    ) -> Step<SyncReply> {
        let error = |error: GroupError| Step::Now(Err(error));
        if self.state() == State::Dead {
            return error(GroupError::CoordinatorNotAvailable);
        }
        if let Err(code) = self.check_member(member_id, group_instance_id) {
            return error(code);
        }
        if generation_id != self.generation {
            return error(GroupError::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != self.protocol_name.as_deref())
        {
            return error(GroupError::InconsistentGroupProtocol);
        }
        match self.state() {
            State::Empty | State::Dead => error(GroupError::UnknownMemberId),
            State::PreparingRebalance => error(GroupError::RebalanceInProgress),
            State::Stable => {
                let member = self.members.get_mut(member_id).expect("checked");
                member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
                Step::Now(Ok(self.synced(member_id)))
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

    fn synced(&self, member_id: &str) -> Synced {
        Synced {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
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
                    let _ = waiter.send(Err(GroupError::CoordinatorNotAvailable));
                }
            }
            self.prepare_rebalance(now);
            return;
        }
        self.set_state(State::Stable);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let synced = self.synced(&id);
            if let Some(waiter) = self.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                let _ = waiter.send(Ok(synced));
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
}
