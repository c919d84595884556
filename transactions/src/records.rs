//! The records of `__transaction_state`, byte for byte as Kafka's `TransactionLog` writes and
//! reads them: the key is `i16` version 0 then `TransactionLogKey`; the value is `i16`
//! version then `TransactionLogValue` (version 0, or the flexible version 1 once the
//! transaction version feature is on); a null value is the tombstone of an expired id.
//!
//! Kafka sets `ClientTransactionVersion` (tag 2 in v1) but leaves `PreviousProducerId` and
//! `NextProducerId` (tags 0, 1) at their defaults, so those are only read. The generated
//! codec keeps all three as unknown tagged fields, so this module packs and unpacks them.
//! An Empty transaction's partition list is null; others group their partitions by topic.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;
use wire::primitives::{Decodable, DecodeError, Encodable, EncodeError};
use wire::txn_records::transaction_log_value::PartitionsSchema;
use wire::txn_records::{TransactionLogKey, TransactionLogValue};

use crate::metadata::{TxnMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::state::TxnState;

/// The only key version (Kafka's `CoordinatorRecordType.TRANSACTION_LOG`).
pub const KEY_VERSION: i16 = 0;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// Why a `__transaction_state` record could not be read or written.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("record key too short")]
    ShortKey,
    #[error("record value too short")]
    ShortValue,
    #[error("unknown transaction log value version {0}")]
    UnknownValueVersion(i16),
    #[error("unknown transaction state id {0}")]
    UnknownState(i8),
    #[error("tagged field {tag} has {len} bytes")]
    BadTaggedField { tag: u32, len: usize },
    #[error("undecodable transaction log record: {0}")]
    Decode(#[from] DecodeError),
    #[error("unencodable transaction log record: {0}")]
    Encode(#[from] EncodeError),
}

/// The value version Kafka writes: 1 (flexible, with tagged fields) once the cluster's
/// `transaction.version` is 1 or more, else 0. A client transaction version above 0 needs
/// the tagged field, so it also selects 1 (Kafka cannot reach that case).
pub fn value_version(transaction_version_level: i16, client_transaction_version: i16) -> i16 {
    if transaction_version_level >= 1 || client_transaction_version >= 1 {
        1
    } else {
        0
    }
}

/// Kafka's `keyToBytes`.
pub fn encode_key(transactional_id: &str) -> Bytes {
    let key = TransactionLogKey {
        transactional_id: transactional_id.to_owned(),
        ..Default::default()
    };
    let mut out = BytesMut::with_capacity(2 + key.encoded_len(KEY_VERSION));
    out.put_i16(KEY_VERSION);
    key.encode(&mut out, KEY_VERSION)
        .expect("a string key encodes at version 0");
    out.freeze()
}

/// Kafka's `valueToBytes` for metadata (never Dead: that is a tombstone).
pub fn encode_value(metadata: &TxnMetadata, version: i16) -> Result<Bytes, RecordError> {
    assert!(
        metadata.state != TxnState::Dead,
        "Dead is written as a tombstone"
    );
    assert!(
        metadata.state != TxnState::Empty || metadata.partitions.is_empty(),
        "an Empty transaction has no partitions"
    );
    let partitions = if metadata.state == TxnState::Empty {
        None
    } else {
        let mut topics: Vec<PartitionsSchema> = Vec::new();
        for (topic, partition) in &metadata.partitions {
            match topics.last_mut() {
                Some(last) if &last.topic == topic => last.partition_ids.push(*partition),
                _ => topics.push(PartitionsSchema {
                    topic: topic.clone(),
                    partition_ids: vec![*partition],
                    ..Default::default()
                }),
            }
        }
        Some(topics)
    };
    let mut unknown_tagged_fields = Vec::new();
    if metadata.client_transaction_version != 0 {
        if version < 1 {
            return Err(EncodeError::FieldNotInVersion {
                field: "ClientTransactionVersion",
                version,
            }
            .into());
        }
        unknown_tagged_fields.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            Bytes::copy_from_slice(&metadata.client_transaction_version.to_be_bytes()),
        ));
    }
    let value = TransactionLogValue {
        producer_id: metadata.producer_id,
        producer_epoch: metadata.producer_epoch,
        transaction_timeout_ms: metadata.txn_timeout_ms,
        transaction_status: metadata.state.id(),
        transaction_partitions: partitions,
        transaction_last_update_timestamp_ms: metadata.txn_last_update_timestamp,
        transaction_start_timestamp_ms: metadata.txn_start_timestamp,
        unknown_tagged_fields,
        ..Default::default()
    };
    let mut out = BytesMut::with_capacity(2 + value.encoded_len(version));
    out.put_i16(version);
    value.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// Kafka's `readTxnRecordKey`: the transactional id, or `None` for a key version this
/// broker does not know (skipped at load, as Kafka skips it).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, RecordError> {
    if key.len() < 2 {
        return Err(RecordError::ShortKey);
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version != KEY_VERSION {
        return Ok(None);
    }
    let mut body = Bytes::copy_from_slice(&key[2..]);
    Ok(Some(
        TransactionLogKey::decode(&mut body, version)?.transactional_id,
    ))
}

/// Kafka's `readTxnRecordValue`: the metadata a value holds (`last_producer_epoch` is not
/// persisted and reads as -1).
pub fn decode_value(transactional_id: &str, value: &[u8]) -> Result<TxnMetadata, RecordError> {
    if value.len() < 2 {
        return Err(RecordError::ShortValue);
    }
    let version = i16::from_be_bytes([value[0], value[1]]);
    if !(0..=1).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    let mut body = Bytes::copy_from_slice(&value[2..]);
    let value = TransactionLogValue::decode(&mut body, version)?;
    let state = TxnState::from_id(value.transaction_status)
        .ok_or(RecordError::UnknownState(value.transaction_status))?;
    let mut previous_producer_id = NO_PRODUCER_ID;
    let mut next_producer_id = NO_PRODUCER_ID;
    let mut client_transaction_version = 0;
    for (tag, data) in &value.unknown_tagged_fields {
        let bad = || RecordError::BadTaggedField {
            tag: *tag,
            len: data.len(),
        };
        match *tag {
            TAG_PREVIOUS_PRODUCER_ID => {
                previous_producer_id = i64::from_be_bytes(data[..].try_into().map_err(|_| bad())?)
            }
            TAG_NEXT_PRODUCER_ID => {
                next_producer_id = i64::from_be_bytes(data[..].try_into().map_err(|_| bad())?)
            }
            TAG_CLIENT_TRANSACTION_VERSION => {
                client_transaction_version =
                    i16::from_be_bytes(data[..].try_into().map_err(|_| bad())?)
            }
            _ => {}
        }
    }
    let mut partitions = BTreeSet::new();
    if state != TxnState::Empty {
        for topic in value.transaction_partitions.iter().flatten() {
            for partition in &topic.partition_ids {
                partitions.insert((topic.topic.clone(), *partition));
            }
        }
    }
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_owned(),
        producer_id: value.producer_id,
        previous_producer_id,
        next_producer_id,
        producer_epoch: value.producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        txn_timeout_ms: value.transaction_timeout_ms,
        state,
        partitions,
        txn_start_timestamp: value.transaction_start_timestamp_ms,
        txn_last_update_timestamp: value.transaction_last_update_timestamp_ms,
        client_transaction_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing(client_transaction_version: i16) -> TxnMetadata {
        let mut metadata = TxnMetadata::new_empty("txn-1", 1000, 60_000, 5);
        metadata.producer_epoch = 3;
        metadata.state = TxnState::Ongoing;
        metadata.partitions = [
            ("b".to_owned(), 1),
            ("a".to_owned(), 2),
            ("a".to_owned(), 0),
        ]
        .into_iter()
        .collect();
        metadata.txn_start_timestamp = 7;
        metadata.txn_last_update_timestamp = 9;
        metadata.client_transaction_version = client_transaction_version;
        metadata
    }

    #[test]
    fn key_matches_kafka_bytes() {
        // Version 0, then the id as an int16-length string.
        assert_eq!(&encode_key("tx")[..], &[0, 0, 0, 2, b't', b'x']);
        assert_eq!(
            decode_key(&encode_key("tx")).unwrap().as_deref(),
            Some("tx")
        );
        assert_eq!(decode_key(&[0, 9, 0, 0]).unwrap(), None);
        assert!(decode_key(&[0]).is_err());
    }

    #[test]
    fn value_v0_matches_kafka_bytes() {
        let mut metadata = ongoing(0);
        metadata.partitions = [("t".to_owned(), 4)].into_iter().collect();
        let bytes = encode_value(&metadata, 0).unwrap();
        let mut want = vec![0u8, 0];
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.extend_from_slice(&1i32.to_be_bytes()); // one topic
        want.extend_from_slice(&[0, 1, b't']);
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(&9i64.to_be_bytes()); // last update
        want.extend_from_slice(&7i64.to_be_bytes()); // start
        assert_eq!(&bytes[..], &want[..]);
    }

    #[test]
    fn values_round_trip_in_both_versions() {
        for (version, tv) in [(0, 0), (1, 0), (1, 2)] {
            let metadata = ongoing(tv);
            let bytes = encode_value(&metadata, version).unwrap();
            assert_eq!(i16::from_be_bytes([bytes[0], bytes[1]]), version);
            let mut back = decode_value("txn-1", &bytes).unwrap();
            back.last_producer_epoch = metadata.last_producer_epoch;
            assert_eq!(back, metadata);
        }
        assert!(encode_value(&ongoing(2), 0).is_err());
    }

    #[test]
    fn empty_writes_null_partitions_and_v1_carries_tags() {
        let metadata = TxnMetadata::new_empty("t", 1, 100, 0);
        let bytes = encode_value(&metadata, 0).unwrap();
        // producer id, epoch, timeout, status, then a null array (-1).
        assert_eq!(&bytes[2 + 8 + 2 + 4 + 1..2 + 8 + 2 + 4 + 1 + 4], &[0xff; 4]);
        let v1 = encode_value(&ongoing(2), 1).unwrap();
        // Ends with: one tagged field, tag 2, size 2, value 2.
        assert_eq!(&v1[v1.len() - 5..], &[1, 2, 2, 0, 2]);
    }

    #[test]
    fn previous_and_next_producer_ids_are_read_from_tags() {
        let mut value = TransactionLogValue {
            producer_id: 5,
            transaction_status: TxnState::PrepareCommit.id(),
            ..Default::default()
        };
        value.unknown_tagged_fields = vec![
            (0, Bytes::copy_from_slice(&4i64.to_be_bytes())),
            (1, Bytes::copy_from_slice(&6i64.to_be_bytes())),
            (2, Bytes::copy_from_slice(&2i16.to_be_bytes())),
        ];
        let mut out = BytesMut::new();
        out.put_i16(1);
        value.encode(&mut out, 1).unwrap();
        let metadata = decode_value("x", &out).unwrap();
        assert_eq!(metadata.previous_producer_id, 4);
        assert_eq!(metadata.next_producer_id, 6);
        assert_eq!(metadata.client_transaction_version, 2);
        assert!(decode_value("x", &[0, 7, 0]).is_err());
        assert!(decode_value("x", &[0]).is_err());
    }
}
