//! The records of `__consumer_offsets`: Kafka's group-coordinator record schemas
//! (`wire::group_records`, generated), as keys and values of ordinary record batches.
//!
//! A key is an `i16` record type followed by the key struct at that version (Kafka's key
//! "version" is the record type: 0/1 offset commit, 2 classic group metadata, 3 to 8 the
//! KIP-848 consumer group records); a value is an `i16` version followed by the value struct.
//! A null value is a tombstone: the key's state is deleted.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;
use wire::group_records::*;
use wire::primitives::{Decodable, DecodeError, Encodable, EncodeError};

#[derive(Debug, Error)]
pub enum RecordError {
    #[error("record key too short")]
    ShortKey,
    #[error("record value too short")]
    ShortValue,
    #[error("undecodable group record (type {record_type}): {source}")]
    Decode {
        record_type: i16,
        source: DecodeError,
    },
    #[error("unencodable group record: {0}")]
    Encode(#[from] EncodeError),
}

macro_rules! group_records {
    ($( $(#[$doc:meta])* $variant:ident($key:ty, $value:ty) = $key_version:literal, $value_version:literal; )*) => {
        /// One record of `__consumer_offsets`; `None` values are tombstones.
        #[derive(Clone, Debug, PartialEq)]
        pub enum GroupRecord {
            $( $(#[$doc])* $variant($key, Option<$value>), )*
        }

        impl GroupRecord {
            /// Encodes the record's key and value (None for a tombstone).
            pub fn encode(&self) -> Result<(Bytes, Option<Bytes>), RecordError> {
                match self {
                    $( GroupRecord::$variant(key, value) => Ok((
                        encode_versioned(key, $key_version)?,
                        value.as_ref().map(|v| encode_versioned(v, $value_version)).transpose()?,
                    )), )*
                }
            }

            /// Decodes a record; `Ok(None)` for a record type this broker does not keep (share
            /// groups, or a type from a later Kafka), which is skipped as Kafka skips them.
            pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<GroupRecord>, RecordError> {
                if key.len() < 2 {
                    return Err(RecordError::ShortKey);
                }
                let record_type = i16::from_be_bytes([key[0], key[1]]);
                let mut key_body = Bytes::copy_from_slice(&key[2..]);
                let record = match record_type {
                    $( $key_version => GroupRecord::$variant(
                        <$key>::decode(&mut key_body, record_type)
                            .map_err(|source| RecordError::Decode { record_type, source })?,
                        value.map(|v| decode_versioned::<$value>(v, record_type)).transpose()?,
                    ), )*
                    0 => GroupRecord::OffsetCommit(
                        OffsetCommitKey::decode(&mut key_body, 0)
                            .map_err(|source| RecordError::Decode { record_type, source })?,
                        value.map(|v| decode_versioned::<OffsetCommitValue>(v, record_type)).transpose()?,
                    ),
                    _ => return Ok(None),
                };
                Ok(Some(record))
            }
        }
    };
}

group_records! {
    /// A committed offset (key type 1; type 0 is read as the same).
    OffsetCommit(OffsetCommitKey, OffsetCommitValue) = 1, 3;
    /// A classic group's metadata: generation, protocol, leader, members.
    GroupMetadata(GroupMetadataKey, GroupMetadataValue) = 2, 3;
    /// A KIP-848 consumer group's epoch.
    ConsumerGroupMetadata(ConsumerGroupMetadataKey, ConsumerGroupMetadataValue) = 3, 0;
    /// A KIP-848 consumer group's subscribed topics' metadata.
    ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue) = 4, 0;
    /// A KIP-848 member's subscription and settings.
    ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue) = 5, 0;
    /// A KIP-848 group's target assignment epoch.
    ConsumerGroupTargetAssignmentMetadata(ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue) = 6, 0;
    /// A KIP-848 member's target assignment.
    ConsumerGroupTargetAssignmentMember(ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue) = 7, 0;
    /// A KIP-848 member's current assignment and epochs.
    ConsumerGroupCurrentMemberAssignment(ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue) = 8, 0;
}

fn encode_versioned<T: Encodable>(message: &T, version: i16) -> Result<Bytes, RecordError> {
    let mut out = BytesMut::with_capacity(2 + message.encoded_len(version));
    out.put_i16(version);
    message.encode(&mut out, version)?;
    Ok(out.freeze())
}

fn decode_versioned<T: Decodable>(bytes: &[u8], record_type: i16) -> Result<T, RecordError> {
    if bytes.len() < 2 {
        return Err(RecordError::ShortValue);
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    let mut body = Bytes::copy_from_slice(&bytes[2..]);
    T::decode(&mut body, version).map_err(|source| RecordError::Decode {
        record_type,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_commit_round_trips_and_tombstones() {
        let record = GroupRecord::OffsetCommit(
            OffsetCommitKey {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                ..Default::default()
            },
            Some(OffsetCommitValue {
                offset: 42,
                leader_epoch: 7,
                metadata: "m".into(),
                commit_timestamp: 1000,
                ..Default::default()
            }),
        );
        let (key, value) = record.encode().unwrap();
        assert_eq!(&key[..2], &[0, 1]);
        let back = GroupRecord::decode(&key, value.as_deref())
            .unwrap()
            .unwrap();
        assert_eq!(back, record);
        let tombstone = GroupRecord::decode(&key, None).unwrap().unwrap();
        assert!(matches!(tombstone, GroupRecord::OffsetCommit(_, None)));
    }

    #[test]
    fn unknown_types_are_skipped_and_garbage_is_an_error() {
        assert!(GroupRecord::decode(&[0, 99, 1, 2], None).unwrap().is_none());
        assert!(GroupRecord::decode(&[0], None).is_err());
        assert!(GroupRecord::decode(&[0, 1, 0xff], None).is_err());
        assert!(
            GroupRecord::decode(&[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1], Some(&[0])).is_err()
        );
    }
}
