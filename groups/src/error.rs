//! Why a group call was refused, as the coordinators say it: one variant per Kafka error a
//! group state machine can return, mapped to the protocol's code by [`GroupError::error_code`]
//! (the only place that knows the numbers' side of it).

use wire::ErrorCode;

/// A group call's refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupError {
    CoordinatorNotAvailable,
    InconsistentGroupProtocol,
    FencedInstanceId,
    UnknownMemberId,
    GroupMaxSizeReached,
    /// KIP-394: the member must join again with the id it was given.
    MemberIdRequired,
    RebalanceInProgress,
    IllegalGeneration,
    GroupIdNotFound,
    UnreleasedInstanceId,
    InvalidRequest,
    InvalidRegularExpression,
    UnsupportedAssignor,
    FencedMemberEpoch,
    StaleMemberEpoch,
    UnsupportedVersion,
    NonEmptyGroup,
}

impl GroupError {
    /// Kafka's error code for this refusal.
    pub fn error_code(self) -> ErrorCode {
        match self {
            GroupError::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
            GroupError::InconsistentGroupProtocol => ErrorCode::InconsistentGroupProtocol,
            GroupError::FencedInstanceId => ErrorCode::FencedInstanceId,
            GroupError::UnknownMemberId => ErrorCode::UnknownMemberId,
            GroupError::GroupMaxSizeReached => ErrorCode::GroupMaxSizeReached,
            GroupError::MemberIdRequired => ErrorCode::MemberIdRequired,
            GroupError::RebalanceInProgress => ErrorCode::RebalanceInProgress,
            GroupError::IllegalGeneration => ErrorCode::IllegalGeneration,
            GroupError::GroupIdNotFound => ErrorCode::GroupIdNotFound,
            GroupError::UnreleasedInstanceId => ErrorCode::UnreleasedInstanceId,
            GroupError::InvalidRequest => ErrorCode::InvalidRequest,
            GroupError::InvalidRegularExpression => ErrorCode::InvalidRegularExpression,
            GroupError::UnsupportedAssignor => ErrorCode::UnsupportedAssignor,
            GroupError::FencedMemberEpoch => ErrorCode::FencedMemberEpoch,
            GroupError::StaleMemberEpoch => ErrorCode::StaleMemberEpoch,
            GroupError::UnsupportedVersion => ErrorCode::UnsupportedVersion,
            GroupError::NonEmptyGroup => ErrorCode::NonEmptyGroup,
        }
    }
}

impl From<GroupError> for ErrorCode {
    fn from(error: GroupError) -> ErrorCode {
        error.error_code()
    }
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error_code().fmt(f)
    }
}

impl std::error::Error for GroupError {}
