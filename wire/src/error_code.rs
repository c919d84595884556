//! Kafka's protocol error codes, as defined by `org.apache.kafka.common.protocol.Errors`
//! (Apache Kafka 4.1: codes -1 through 133).
//!
//! The numbers are wire protocol and must never change; the names follow Java's constants
//! in CamelCase, and the messages are Java's default messages. `is_retriable` mirrors
//! whether Java's exception for the code extends `RetriableException` (directly or via
//! `InvalidMetadataException`), which is what clients use to decide whether to retry.

/// Defines the enum and its lookup tables from one list, so a code, its retriability and
/// its message cannot drift apart.
macro_rules! error_codes {
    ($( ($name:ident, $code:literal, $retriable:literal, $message:literal) ),* $(,)?) => {
        /// A Kafka protocol error code.
        #[repr(i16)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(
                #[doc = $message]
                $name = $code,
            )*
        }

        impl ErrorCode {
            /// Every code Kafka defines, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// The code for `code`, or `None` for a number Kafka does not define (yet).
            pub fn from_code(code: i16) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }

            /// Kafka's default message for the code.
            pub fn message(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $message,)*
                }
            }

            /// Whether a client may retry the request that failed with this code.
            pub fn is_retriable(self) -> bool {
                match self {
                    $(ErrorCode::$name => $retriable,)*
                }
            }
        }
    };
}

error_codes! {
    (UnknownServerError, -1, false, "The server experienced an unexpected error when processing the request."),
    (None, 0, false, "No error."),
    (OffsetOutOfRange, 1, false, "The requested offset is not within the range of offsets maintained by the server."),
    (CorruptMessage, 2, true, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    (UnknownTopicOrPartition, 3, true, "This server does not host this topic-partition."),
    (InvalidFetchSize, 4, false, "The requested fetch size is invalid."),
    (LeaderNotAvailable, 5, true, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (NotLeaderOrFollower, 6, true, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."),
    (RequestTimedOut, 7, true, "The request timed out."),
    (BrokerNotAvailable, 8, false, "The broker is not available."),
    (ReplicaNotAvailable, 9, true, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."),
    (MessageTooLarge, 10, false, "The request included a message larger than the max message size the server will accept."),
    (StaleControllerEpoch, 11, false, "The controller moved to another broker."),
    (OffsetMetadataTooLarge, 12, false, "The metadata field of the offset request was too large."),
    (NetworkException, 13, true, "The server disconnected before a response was received."),
    (CoordinatorLoadInProgress, 14, true, "The coordinator is loading and hence can't process requests."),
    (CoordinatorNotAvailable, 15, true, "The coordinator is not available."),
    (NotCoordinator, 16, true, "This is not the correct coordinator."),
    (InvalidTopicException, 17, false, "The request attempted to perform an operation on an invalid topic."),
    (RecordListTooLarge, 18, false, "The request included message batch larger than the configured segment size on the server."),
    (NotEnoughReplicas, 19, true, "Messages are rejected since there are fewer in-sync replicas than required."),
    (NotEnoughReplicasAfterAppend, 20, true, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (InvalidRequiredAcks, 21, false, "Produce request specified an invalid value for required acks."),
    (IllegalGeneration, 22, false, "Specified group generation id is not valid."),
    (InconsistentGroupProtocol, 23, false, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    (InvalidGroupId, 24, false, "The group id is invalid."),
    (UnknownMemberId, 25, false, "The coordinator is not aware of this member."),
    (InvalidSessionTimeout, 26, false, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    (RebalanceInProgress, 27, false, "The group is rebalancing, so a rejoin is needed."),
    (InvalidCommitOffsetSize, 28, false, "The committing offset data size is not valid."),
    (TopicAuthorizationFailed, 29, false, "Topic authorization failed."),
    (GroupAuthorizationFailed, 30, false, "Group authorization failed."),
    (ClusterAuthorizationFailed, 31, false, "Cluster authorization failed."),
    (InvalidTimestamp, 32, false, "The timestamp of the message is out of acceptable range."),
    (UnsupportedSaslMechanism, 33, false, "The broker does not support the requested SASL mechanism."),
    (IllegalSaslState, 34, false, "Request is not valid given the current SASL state."),
    (UnsupportedVersion, 35, false, "The version of API is not supported."),
    (TopicAlreadyExists, 36, false, "Topic with this name already exists."),
    (InvalidPartitions, 37, false, "Number of partitions is below 1."),
    (InvalidReplicationFactor, 38, false, "Replication factor is below 1 or larger than the number of available brokers."),
    (InvalidReplicaAssignment, 39, false, "Replica assignment is invalid."),
    (InvalidConfig, 40, false, "Configuration is invalid."),
    (NotController, 41, true, "This is not the correct controller for this cluster."),
    (InvalidRequest, 42, false, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."),
    (UnsupportedForMessageFormat, 43, false, "The message format version on the broker does not support the request."),
    (PolicyViolation, 44, false, "Request parameters do not satisfy the configured policy."),
    (OutOfOrderSequenceNumber, 45, false, "The broker received an out of order sequence number."),
    (DuplicateSequenceNumber, 46, false, "The broker received a duplicate sequence number."),
    (InvalidProducerEpoch, 47, false, "Producer attempted to produce with an old epoch."),
    (InvalidTxnState, 48, false, "The producer attempted a transactional operation in an invalid state."),
    (InvalidProducerIdMapping, 49, false, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (InvalidTransactionTimeout, 50, false, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."),
    (ConcurrentTransactions, 51, true, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (TransactionCoordinatorFenced, 52, false, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."),
    (TransactionalIdAuthorizationFailed, 53, false, "Transactional Id authorization failed."),
    (SecurityDisabled, 54, false, "Security features are disabled."),
    (OperationNotAttempted, 55, false, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."),
    (KafkaStorageError, 56, true, "Disk error when trying to access log file on the disk."),
    (LogDirNotFound, 57, false, "The user-specified log directory is not found in the broker config."),
    (SaslAuthenticationFailed, 58, false, "SASL Authentication failed."),
    (UnknownProducerId, 59, false, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    (ReassignmentInProgress, 60, false, "A partition reassignment is in progress."),
    (DelegationTokenAuthDisabled, 61, false, "Delegation Token feature is not enabled."),
    (DelegationTokenNotFound, 62, false, "Delegation Token is not found on server."),
    (DelegationTokenOwnerMismatch, 63, false, "Specified Principal is not valid Owner/Renewer."),
    (DelegationTokenRequestNotAllowed, 64, false, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."),
    (DelegationTokenAuthorizationFailed, 65, false, "Delegation Token authorization failed."),
    (DelegationTokenExpired, 66, false, "Delegation Token is expired."),
    (InvalidPrincipalType, 67, false, "Supplied principalType is not supported."),
    (NonEmptyGroup, 68, false, "The group is not empty."),
    (GroupIdNotFound, 69, false, "The group id does not exist."),
    (FetchSessionIdNotFound, 70, true, "The fetch session ID was not found."),
    (InvalidFetchSessionEpoch, 71, true, "The fetch session epoch is invalid."),
    (ListenerNotFound, 72, true, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (TopicDeletionDisabled, 73, false, "Topic deletion is disabled."),
    (FencedLeaderEpoch, 74, true, "The leader epoch in the request is older than the epoch on the broker."),
    (UnknownLeaderEpoch, 75, true, "The leader epoch in the request is newer than the epoch on the broker."),
    (UnsupportedCompressionType, 76, false, "The requesting client does not support the compression type of given partition."),
    (StaleBrokerEpoch, 77, false, "Broker epoch has changed."),
    (OffsetNotAvailable, 78, true, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (MemberIdRequired, 79, false, "The group member needs to have a valid member id before actually entering a consumer group."),
    (PreferredLeaderNotAvailable, 80, true, "The preferred leader was not available."),
    (GroupMaxSizeReached, 81, false, "The group has reached its maximum size."),
    (FencedInstanceId, 82, false, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."),
    (EligibleLeadersNotAvailable, 83, true, "Eligible topic partition leaders are not available."),
    (ElectionNotNeeded, 84, true, "Leader election not needed for topic partition."),
    (NoReassignmentInProgress, 85, false, "No partition reassignment is in progress."),
    (GroupSubscribedToTopic, 86, false, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (InvalidRecord, 87, false, "This record has failed the validation on broker and hence will be rejected."),
    (UnstableOffsetCommit, 88, true, "There are unstable offsets that need to be cleared."),
    (ThrottlingQuotaExceeded, 89, true, "The throttling quota has been exceeded."),
    (ProducerFenced, 90, false, "There is a newer producer with the same transactionalId which fences the current one."),
    (ResourceNotFound, 91, false, "A request illegally referred to a resource that does not exist."),
    (DuplicateResource, 92, false, "A request illegally referred to the same resource twice."),
    (UnacceptableCredential, 93, false, "Requested credential would not meet criteria for acceptability."),
    (InconsistentVoterSet, 94, false, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."),
    (InvalidUpdateVersion, 95, false, "The given update version was invalid."),
    (FeatureUpdateFailed, 96, false, "Unable to update finalized features due to an unexpected server error."),
    (PrincipalDeserializationFailure, 97, false, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."),
    (SnapshotNotFound, 98, false, "Requested snapshot was not found."),
    (PositionOutOfRange, 99, false, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (UnknownTopicId, 100, true, "This server does not host this topic ID."),
    (DuplicateBrokerRegistration, 101, false, "This broker ID is already in use."),
    (BrokerIdNotRegistered, 102, false, "The given broker ID was not registered."),
    (InconsistentTopicId, 103, true, "The log's topic ID did not match the topic ID in the request."),
    (InconsistentClusterId, 104, false, "The clusterId in the request does not match that found on the server."),
    (TransactionalIdNotFound, 105, false, "The transactionalId could not be found."),
    (FetchSessionTopicIdError, 106, true, "The fetch session encountered inconsistent topic ID usage."),
    (IneligibleReplica, 107, false, "The new ISR contains at least one ineligible replica."),
    (NewLeaderElected, 108, false, "The AlterPartition request successfully updated the partition state but the leader has changed."),
    (OffsetMovedToTieredStorage, 109, false, "The requested offset is moved to tiered storage."),
    (FencedMemberEpoch, 110, false, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."),
    (UnreleasedInstanceId, 111, false, "The instance ID is still used by another member in the consumer group. That member must leave first."),
    (UnsupportedAssignor, 112, false, "The assignor or its version range is not supported by the consumer group."),
    (StaleMemberEpoch, 113, false, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."),
    (MismatchedEndpointType, 114, false, "The request was sent to an endpoint of the wrong type."),
    (UnsupportedEndpointType, 115, false, "This endpoint type is not supported yet."),
    (UnknownControllerId, 116, false, "This controller ID is not known."),
    (UnknownSubscriptionId, 117, false, "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (TelemetryTooLarge, 118, false, "Client sent a push telemetry request larger than the maximum size the broker will accept."),
    (InvalidRegistration, 119, false, "The controller has considered the broker registration to be invalid."),
    (TransactionAbortable, 120, false, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."),
    (InvalidRecordState, 121, false, "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (ShareSessionNotFound, 122, true, "The share session was not found."),
    (InvalidShareSessionEpoch, 123, true, "The share session epoch is invalid."),
    (FencedStateEpoch, 124, false, "The share coordinator rejected the request because the share-group state epoch did not match."),
    (InvalidVoterKey, 125, false, "The voter key doesn't match the receiving replica's key."),
    (DuplicateVoter, 126, false, "The voter is already part of the set of voters."),
    (VoterNotFound, 127, false, "The voter is not part of the set of voters."),
    (InvalidRegularExpression, 128, false, "The regular expression is not valid."),
    (RebootstrapRequired, 129, false, "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (StreamsInvalidTopology, 130, false, "The supplied topology is invalid."),
    (StreamsInvalidTopologyEpoch, 131, false, "The supplied topology epoch is invalid."),
    (StreamsTopologyFenced, 132, false, "The supplied topology epoch is outdated."),
    (ShareSessionLimitReached, 133, true, "The limit of share sessions has been reached."),
}

impl ErrorCode {
    /// The numeric code sent on the wire.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// Like [`ErrorCode::from_code`], but maps numbers this build does not know to
    /// `UnknownServerError`, which is what Java clients do with codes newer than themselves.
    pub fn from_code_or_unknown(code: i16) -> ErrorCode {
        ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError)
    }

    /// Whether this is `None` (success).
    pub fn is_ok(self) -> bool {
        self == ErrorCode::None
    }

    /// Kafka's name of the code, the Java `Errors` constant (`MESSAGE_TOO_LARGE`), as its
    /// tools print it and its metrics label it.
    pub fn kafka_name(self) -> String {
        let camel = format!("{self:?}");
        let mut name = String::with_capacity(camel.len() + 8);
        for (i, c) in camel.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }
}

impl From<ErrorCode> for i16 {
    fn from(code: ErrorCode) -> i16 {
        code.code()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({}): {}", self, self.code(), self.message())
    }
}

impl std::error::Error for ErrorCode {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_contiguous_and_round_trip() {
        // Kafka assigns codes densely from -1; a gap or duplicate here means a typo.
        assert_eq!(ErrorCode::ALL.len(), 135);
        for (index, &code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(code.code(), index as i16 - 1);
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
            assert!(!code.message().is_empty());
        }
        assert_eq!(ErrorCode::MessageTooLarge.kafka_name(), "MESSAGE_TOO_LARGE");
        assert_eq!(ErrorCode::None.kafka_name(), "NONE");
        assert_eq!(ErrorCode::from_code(134), None);
        assert_eq!(ErrorCode::from_code(-2), None);
        assert_eq!(
            ErrorCode::from_code_or_unknown(i16::MAX),
            ErrorCode::UnknownServerError
        );
    }

    #[test]
    fn well_known_numbers() {
        // Spot checks against Errors.java for the codes the broker sends most.
        let expected = [
            (ErrorCode::UnknownServerError, -1),
            (ErrorCode::None, 0),
            (ErrorCode::OffsetOutOfRange, 1),
            (ErrorCode::CorruptMessage, 2),
            (ErrorCode::UnknownTopicOrPartition, 3),
            (ErrorCode::NotLeaderOrFollower, 6),
            (ErrorCode::MessageTooLarge, 10),
            (ErrorCode::InvalidTopicException, 17),
            (ErrorCode::RecordListTooLarge, 18),
            (ErrorCode::InvalidRequiredAcks, 21),
            (ErrorCode::UnsupportedVersion, 35),
            (ErrorCode::TopicAlreadyExists, 36),
            (ErrorCode::InvalidConfig, 40),
            (ErrorCode::InvalidRequest, 42),
            (ErrorCode::UnsupportedForMessageFormat, 43),
            (ErrorCode::OutOfOrderSequenceNumber, 45),
            (ErrorCode::KafkaStorageError, 56),
            (ErrorCode::InvalidRecord, 87),
            (ErrorCode::ProducerFenced, 90),
            (ErrorCode::UnknownTopicId, 100),
            (ErrorCode::ShareSessionLimitReached, 133),
        ];
        for (code, number) in expected {
            assert_eq!(code.code(), number, "{code:?}");
        }
    }

    #[test]
    fn retriability_follows_the_java_exceptions() {
        for code in [
            ErrorCode::CorruptMessage,
            ErrorCode::UnknownTopicOrPartition,
            ErrorCode::LeaderNotAvailable,
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::RequestTimedOut,
            ErrorCode::NotEnoughReplicas,
            ErrorCode::ConcurrentTransactions,
            ErrorCode::KafkaStorageError,
            ErrorCode::UnknownTopicId,
        ] {
            assert!(code.is_retriable(), "{code:?}");
        }
        for code in [
            ErrorCode::None,
            ErrorCode::UnknownServerError,
            ErrorCode::MessageTooLarge,
            ErrorCode::InvalidRecord,
            ErrorCode::OffsetOutOfRange,
            ErrorCode::ProducerFenced,
        ] {
            assert!(!code.is_retriable(), "{code:?}");
        }
    }
}
