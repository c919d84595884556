use super::*;

pub(crate) fn samples() -> Vec<MetadataRecord> {
    let id = [7u8; 16];
    vec![
        MetadataRecord::Topic {
            name: "orders".into(),
            topic_id: id,
        },
        MetadataRecord::Partition {
            topic_id: id,
            partition_id: 3,
            replicas: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 5,
            isr: vec![1, 2],
            partition_epoch: 0,
            shard: 2,
        },
        MetadataRecord::Partition {
            topic_id: id,
            partition_id: 0,
            replicas: vec![],
            leader: -1,
            leader_epoch: -1,
            isr: vec![],
            partition_epoch: 0,
            shard: u16::MAX,
        },
        MetadataRecord::Config {
            resource_type: RESOURCE_TOPIC,
            resource_name: "orders".into(),
            name: "retention.ms".into(),
            value: Some("1000".into()),
        },
        MetadataRecord::Config {
            resource_type: RESOURCE_BROKER,
            resource_name: "".into(),
            name: "x".into(),
            value: None,
        },
        MetadataRecord::Config {
            resource_type: RESOURCE_TOPIC,
            resource_name: "ü".into(),
            name: "".into(),
            value: Some("".into()),
        },
        MetadataRecord::RemoveTopic { topic_id: id },
        MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: -1,
            next_producer_id: 5000,
        },
        MetadataRecord::PartitionChange {
            topic_id: id,
            partition_id: 3,
            leader: NO_LEADER_CHANGE,
            isr: Some(vec![1]),
            replicas: None,
        },
        MetadataRecord::PartitionChange {
            topic_id: id,
            partition_id: 0,
            leader: 2,
            isr: None,
            replicas: Some(vec![]),
        },
        MetadataRecord::RegisterBroker(BrokerRegistration {
            broker_id: 2,
            incarnation_id: [9; 16],
            broker_epoch: 77,
            endpoints: vec![
                BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: "10.0.0.2".into(),
                    port: 9092,
                    security_protocol: 0,
                },
                BrokerEndpoint {
                    name: "SSL".into(),
                    host: "h".into(),
                    port: u16::MAX,
                    security_protocol: 1,
                },
            ],
            rack: Some("rack-a".into()),
            fenced: true,
            in_controlled_shutdown: false,
        }),
        MetadataRecord::UnregisterBroker {
            broker_id: 2,
            broker_epoch: 77,
        },
        MetadataRecord::BrokerRegistrationChange {
            broker_id: 2,
            broker_epoch: 77,
            fenced: Some(false),
            in_controlled_shutdown: None,
        },
        MetadataRecord::BrokerRegistrationChange {
            broker_id: 3,
            broker_epoch: 1,
            fenced: Some(true),
            in_controlled_shutdown: Some(true),
        },
        MetadataRecord::UserScramCredential(ScramCredentialRecord {
            name: "alice".into(),
            mechanism: 2,
            salt: vec![1, 2, 3],
            stored_key: vec![4; 64],
            server_key: vec![5; 64],
            iterations: 8192,
        }),
        MetadataRecord::RemoveUserScramCredential {
            name: "ü".into(),
            mechanism: 1,
        },
        MetadataRecord::AccessControlEntry {
            id: [3; 16],
            binding: acl::AclBinding::new(
                acl::ResourcePattern::new(
                    acl::ResourceType::Topic,
                    "orders-",
                    acl::PatternType::Prefixed,
                ),
                acl::AccessControlEntry::new(
                    "User:ü",
                    "*",
                    acl::AclOperation::Read,
                    acl::AclPermissionType::Deny,
                ),
            ),
        },
        MetadataRecord::RemoveAccessControlEntry { id: [3; 16] },
        MetadataRecord::ClientQuota(QuotaRecord {
            entity: vec![
                ("client-id".into(), None),
                ("user".into(), Some("ü".into())),
            ],
            key: "producer_byte_rate".into(),
            value: 1048576.0,
            remove: false,
        }),
    ]
}

/// A PartitionRecord written before body version 1 (no ISR, no partition epoch) reads as
/// ISR = replicas, partition epoch 0: data directories of earlier releases still open.
#[test]
fn partition_body_version_0_still_reads() {
    let mut body = Vec::new();
    body.extend_from_slice(&[7u8; 16]);
    body.extend_from_slice(&4i32.to_be_bytes());
    put_ids(&mut body, &[1, 2]);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&3i32.to_be_bytes());
    body.extend_from_slice(&5u16.to_be_bytes());
    let rec = MetadataRecord::decode_body(TYPE_PARTITION, 0, &body).unwrap();
    assert_eq!(
        rec,
        MetadataRecord::Partition {
            topic_id: [7; 16],
            partition_id: 4,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 0,
            shard: 5,
        }
    );
    assert!(MetadataRecord::decode_body(TYPE_PARTITION, 2, &body).is_err());
}

#[test]
fn round_trip() {
    let mut buf = Vec::new();
    let entries: Vec<LogEntry> = samples()
        .into_iter()
        .enumerate()
        .map(|(i, record)| LogEntry {
            offset: i as u64 * 1000,
            epoch: i as u32,
            record,
        })
        .collect();
    for e in &entries {
        encode_entry(e, &mut buf);
    }
    let mut pos = 0;
    for e in &entries {
        let (got, used) = decode_entry(&buf[pos..]).unwrap();
        assert_eq!(&got, e);
        pos += used;
    }
    assert_eq!(pos, buf.len());
}

#[test]
fn torn_and_corrupt() {
    let mut buf = Vec::new();
    let e = LogEntry {
        offset: 1,
        epoch: 0,
        record: samples().remove(1),
    };
    encode_entry(&e, &mut buf);
    for cut in 0..buf.len() {
        assert_eq!(
            decode_entry(&buf[..cut]).unwrap_err(),
            DecodeError::Truncated,
            "cut {cut}"
        );
    }
    for i in FRAME_PREFIX..buf.len() {
        let mut b = buf.clone();
        b[i] ^= 0x40;
        assert_eq!(decode_entry(&b).unwrap_err(), DecodeError::BadCrc);
    }
}

#[test]
fn garbage_never_panics() {
    // xorshift: deterministic, no rand dependency needed.
    let mut s: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for _ in 0..20_000 {
        let len = (next() % 64) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for ty in [2u8, 3, 4, 9, 0, 1, 5, 11, 15, 17, 18, 19, 22, 255] {
            let _ = MetadataRecord::decode_body(ty, 0, &body);
            let _ = MetadataRecord::decode_body(ty, 1, &body);
        }
        // Also as a frame with a valid crc, so the body decoder is reached.
        if body.len() >= FRAME_PREFIX + FRAME_HEADER {
            let n = body.len() - FRAME_PREFIX;
            body[0..4].copy_from_slice(&(n as u32).to_be_bytes());
            body[FRAME_PREFIX] =
                [0u8, 1, 2, 3, 4, 5, 9, 11, 15, 17, 18, 19, 22][(next() % 13) as usize];
            body[FRAME_PREFIX + 1] = (next() % 2) as u8;
            let crc = crc32c::crc32c(&body[FRAME_PREFIX..]);
            body[4..8].copy_from_slice(&crc.to_be_bytes());
        }
        let _ = decode_entry(&body);
    }
    // Huge declared counts must not allocate.
    let mut b = vec![0u8; 20];
    b[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(MetadataRecord::decode_body(3, 0, &b).is_err());
    assert!(MetadataRecord::decode_body(2, 0, &[0xff; 4]).is_err());
    assert!(MetadataRecord::decode_body(2, 1, &[]).is_err());
}
