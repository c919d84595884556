//! What OffsetCommit and OffsetFetch require of a consumer group's members.

use crate::GroupError;

use super::ConsumerGroup;

impl ConsumerGroup {
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
    ) -> Result<(), GroupError> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if !transactional && api_version < 9 {
            return Err(GroupError::UnsupportedVersion);
        }
        if member_epoch != member.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// OffsetFetch's check when the request names a member (v9+): the member must exist and
    /// send its current epoch; without a member id and with a negative epoch anyone may fetch.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let Some(member_id) = member_id else {
            return if member_epoch < 0 {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId)
            };
        };
        let member = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if member_epoch != member.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }
}
