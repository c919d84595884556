//! What the offset APIs and DeleteGroups require of a classic group (Kafka's
//! `ClassicGroup.validateOffsetCommit`, `validateOffsetDelete` and `validateDeleteGroup`).

use super::{subscribed_topics, ClassicGroup, GroupError, State};

impl ClassicGroup {
    /// OffsetCommit's check: a commit with a negative generation (admin, or a consumer that
    /// manages its own partitions) is accepted only while the group is empty; members must
    /// commit with their current generation, and not while the group completes a rebalance.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        generation: i32,
    ) -> Result<(), GroupError> {
        match self.state() {
            State::Dead => Err(GroupError::CoordinatorNotAvailable),
            State::Empty if generation < 0 => Ok(()),
            State::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            // An admin commit to a group with members.
            _ if generation < 0 && member_id.is_empty() => Err(GroupError::UnknownMemberId),
            _ if !self.has_member(member_id) => Err(GroupError::UnknownMemberId),
            _ if generation != self.generation => Err(GroupError::IllegalGeneration),
            _ => Ok(()),
        }
    }

    /// OffsetDelete's check: the topics the members subscribe to (their offsets stay), or
    /// NON_EMPTY_GROUP for a group with members whose protocol is not the consumer's (their
    /// subscriptions cannot be read).
    pub fn offsets_in_use(&self) -> Result<Vec<String>, GroupError> {
        if self.state() == State::Empty {
            return Ok(Vec::new());
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return Err(GroupError::NonEmptyGroup);
        }
        Ok(self
            .members()
            .flat_map(|m| {
                m.protocols
                    .first()
                    .map(|(_, metadata)| subscribed_topics(metadata))
                    .unwrap_or_default()
            })
            .collect())
    }

    /// DeleteGroups' check: only an empty group can be deleted; a dead one is gone already.
    pub fn validate_delete(&self) -> Result<(), GroupError> {
        match self.state() {
            State::Empty => Ok(()),
            State::Dead => Err(GroupError::GroupIdNotFound),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }
}
