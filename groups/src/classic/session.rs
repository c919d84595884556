//! A classic group's members staying in it or leaving: Heartbeat, LeaveGroup, and `tick`'s
//! deadlines (expired sessions, a join phase that ran out, a sync that never came).

use super::{ClassicGroup, GroupError, State};

impl ClassicGroup {
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: u64,
    ) -> Result<(), GroupError> {
        match self.state() {
            State::Dead => return Err(GroupError::CoordinatorNotAvailable),
            State::Empty => return Err(GroupError::UnknownMemberId),
            _ => {}
        }
        self.check_member(member_id, group_instance_id)?;
        if generation_id != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        let member = self.members.get_mut(member_id).expect("checked");
        member.heartbeat_deadline = now + member.session_timeout_ms.max(0) as u64;
        if self.state() == State::PreparingRebalance {
            Err(GroupError::RebalanceInProgress)
        } else {
            Ok(())
        }
    }

    /// LeaveGroup of one member (by member id, or by instance id for a static member).
    pub fn leave(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        now: u64,
    ) -> Result<(), GroupError> {
        if self.state() == State::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let id = match group_instance_id {
            Some(instance) => match self.static_members.get(instance) {
                Some(known) if member_id.is_empty() || known == member_id => known.clone(),
                Some(_) => return Err(GroupError::FencedInstanceId),
                None => return Err(GroupError::UnknownMemberId),
            },
            None => {
                if self.pending.remove(member_id).is_some() {
                    self.maybe_complete_join(now);
                    return Ok(());
                }
                member_id.to_string()
            }
        };
        let Some(mut member) = self.remove_member(&id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(Self::join_error(&id, GroupError::UnknownMemberId));
        }
        self.after_removal(now);
        Ok(())
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
                self.remove_members_where(|m| m.sync_waiter.is_none());
                self.prepare_rebalance(now);
                self.maybe_complete_join(now);
            }
            _ => {}
        }
    }
}
