//! Metadata records and their on-disk frame format.
//!
//! Records are modelled on Kafka's KRaft metadata records (TopicRecord, PartitionRecord,
//! ConfigRecord, RemoveTopicRecord; field names kept) so that a later Raft replication of the
//! same log maps one-to-one. The record type byte is Kafka's metadata `apiKey`. We add `shard`
//! to PartitionRecord because partitions are owned per core.
//!
//! The encoding is our own, simple and versioned (big-endian, like Kafka):
//!
//! ```text
//! frame  = length:u32  crc:u32  type:u8  version:u8  offset:u64  epoch:u32  body
//!          length = bytes after the crc field; crc = crc32c over those bytes
//! string = len:u32 utf8            nullable string = len:i32 (-1 = null) utf8
//! array  = count:u32 item*         uuid = 16 bytes
//! ```
//!
//! Decoding is bounded by the input: every length is checked against the bytes that remain
//! before anything is allocated, so garbage yields an error, never a panic or a huge
//! allocation.

/// Kafka-style 16-byte topic id.
pub use wire::TopicId;

/// Frames larger than this are treated as corruption (a metadata record is tiny; this bounds
/// what a corrupt length field can make us read).
pub const MAX_FRAME: usize = 16 << 20;

/// Bytes of a frame before the `length` bytes it declares (length + crc).
pub const FRAME_PREFIX: usize = 8;

/// Fixed bytes inside the covered part: type, version, offset, epoch.
const FRAME_HEADER: usize = 1 + 1 + 8 + 4;

/// Kafka's ConfigResource type for topics.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's ConfigResource type for brokers.
pub const RESOURCE_BROKER: i8 = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// TopicRecord (apiKey 2).
    Topic { name: String, topic_id: TopicId },
    /// PartitionRecord (apiKey 3), plus the owning shard. Body version 1 added `isr` and
    /// `partition_epoch` (version 0 bodies read as ISR = replicas, partition epoch 0).
    Partition {
        topic_id: TopicId,
        partition_id: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        shard: u16,
    },
    /// PartitionChangeRecord (apiKey 5): a leader, ISR or replica change of one partition.
    /// Every change bumps the partition epoch; a change of leader bumps the leader epoch.
    PartitionChange {
        topic_id: TopicId,
        partition_id: i32,
        /// Kafka's encoding: `NO_LEADER_CHANGE` (-2) keeps the leader, -1 is "no leader".
        leader: i32,
        isr: Option<Vec<i32>>,
        replicas: Option<Vec<i32>>,
    },
    /// RegisterBrokerRecord (apiKey 0): a broker registered (KIP-631), with the epoch the
    /// controller gave this incarnation.
    RegisterBroker(BrokerRegistration),
    /// UnregisterBrokerRecord (apiKey 1); applies only to the registration of that epoch.
    UnregisterBroker { broker_id: i32, broker_epoch: i64 },
    /// BrokerRegistrationChangeRecord (apiKey 17): fenced or unfenced, entering controlled
    /// shutdown; `None` keeps the current value. Applies only to the registration of that
    /// epoch.
    BrokerRegistrationChange {
        broker_id: i32,
        broker_epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
    },
    /// ConfigRecord (apiKey 4). `value: None` deletes the key.
    Config {
        resource_type: i8,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// RemoveTopicRecord (apiKey 9).
    RemoveTopic { topic_id: TopicId },
    /// ProducerIdsRecord (apiKey 15): a block of producer ids was handed out; ids below
    /// `next_producer_id` are never given again.
    ProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        next_producer_id: i64,
    },
    /// UserScramCredentialRecord (apiKey 11, KIP-554): a user's SCRAM credential for one
    /// mechanism, created or replaced. Holds what the server needs to authenticate the user,
    /// never the password.
    UserScramCredential(ScramCredentialRecord),
    /// RemoveUserScramCredentialRecord (apiKey 22): the credential of `name` for `mechanism`
    /// is gone.
    RemoveUserScramCredential { name: String, mechanism: i8 },
    /// AccessControlEntryRecord (apiKey 18): an ACL and its id (a random Uuid).
    AccessControlEntry {
        id: acl::AclId,
        binding: acl::AclBinding,
    },
    /// RemoveAccessControlEntryRecord (apiKey 19): the ACL of that id is gone.
    RemoveAccessControlEntry { id: acl::AclId },
    /// ClientQuotaRecord (apiKey 14): one quota of a client entity set, or removed.
    ClientQuota(QuotaRecord),
}

/// ClientQuotaRecord's fields (Kafka's names). `entity` holds (entity type, entity name)
/// pairs sorted by type, a `None` name being that type's default entity.
#[derive(Clone, Debug)]
pub struct QuotaRecord {
    pub entity: Vec<(String, Option<String>)>,
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

/// Bitwise, so that a record equals itself after a round trip (NaN never gets here: the
/// controller refuses it).
impl PartialEq for QuotaRecord {
    fn eq(&self, other: &Self) -> bool {
        self.entity == other.entity
            && self.key == other.key
            && self.value.to_bits() == other.value.to_bits()
            && self.remove == other.remove
    }
}

impl Eq for QuotaRecord {}

/// UserScramCredentialRecord's fields (Kafka's names). `mechanism` is Kafka's
/// `ScramMechanism` type (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentialRecord {
    pub name: String,
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Keys stay out of logs and panics (Kafka's `ScramCredentialValue.toString` hides them too).
impl std::fmt::Debug for ScramCredentialRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentialRecord")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// PartitionChangeRecord's leader value for "unchanged".
pub const NO_LEADER_CHANGE: i32 = -2;

/// A listener a broker is reached at (RegisterBrokerRecord's EndPoints).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's SecurityProtocol id (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL).
    pub security_protocol: i16,
}

/// One broker's registration (RegisterBrokerRecord's fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    /// Random per process start: tells a restarted broker from a retried registration.
    pub incarnation_id: [u8; 16],
    /// Given by the controller at registration; heartbeats and changes name it.
    pub broker_epoch: i64,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

/// One log entry: offset, Raft term/epoch (0 until replication exists) and the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub offset: u64,
    pub epoch: u32,
    pub record: MetadataRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the frame needs: a torn write at the tail of a log.
    #[error("truncated frame")]
    Truncated,
    #[error("frame length {0} out of range")]
    BadLength(usize),
    #[error("crc mismatch")]
    BadCrc,
    #[error("unknown record type {0}")]
    UnknownType(u8),
    #[error("unsupported version {version} of record type {record_type}")]
    UnsupportedVersion { record_type: u8, version: u8 },
    #[error("malformed record body: {0}")]
    Malformed(&'static str),
}

const TYPE_REGISTER_BROKER: u8 = 0;
const TYPE_UNREGISTER_BROKER: u8 = 1;
const TYPE_TOPIC: u8 = 2;
const TYPE_PARTITION: u8 = 3;
const TYPE_CONFIG: u8 = 4;
const TYPE_PARTITION_CHANGE: u8 = 5;
const TYPE_REMOVE_TOPIC: u8 = 9;
const TYPE_PRODUCER_IDS: u8 = 15;
const TYPE_BROKER_REGISTRATION_CHANGE: u8 = 17;
const TYPE_USER_SCRAM_CREDENTIAL: u8 = 11;
const TYPE_REMOVE_USER_SCRAM_CREDENTIAL: u8 = 22;
const TYPE_ACCESS_CONTROL_ENTRY: u8 = 18;
const TYPE_REMOVE_ACCESS_CONTROL_ENTRY: u8 = 19;
const TYPE_CLIENT_QUOTA: u8 = 14;

/// A record's replica list, ISR or endpoint count above this is corruption (Kafka caps a
/// replication factor far lower; this bounds what a damaged body can make us allocate).
const MAX_LIST: usize = 1 << 16;
/// Entity types a quota entity may name (Kafka knows three: user, client-id, ip).
const MAX_QUOTA_ENTITY_PARTS: usize = 3;

impl MetadataRecord {
    /// Kafka metadata apiKey of this record.
    pub fn record_type(&self) -> u8 {
        match self {
            MetadataRecord::Topic { .. } => TYPE_TOPIC,
            MetadataRecord::Partition { .. } => TYPE_PARTITION,
            MetadataRecord::Config { .. } => TYPE_CONFIG,
            MetadataRecord::RemoveTopic { .. } => TYPE_REMOVE_TOPIC,
            MetadataRecord::ProducerIds { .. } => TYPE_PRODUCER_IDS,
            MetadataRecord::PartitionChange { .. } => TYPE_PARTITION_CHANGE,
            MetadataRecord::RegisterBroker(_) => TYPE_REGISTER_BROKER,
            MetadataRecord::UnregisterBroker { .. } => TYPE_UNREGISTER_BROKER,
            MetadataRecord::BrokerRegistrationChange { .. } => TYPE_BROKER_REGISTRATION_CHANGE,
            MetadataRecord::UserScramCredential(_) => TYPE_USER_SCRAM_CREDENTIAL,
            MetadataRecord::RemoveUserScramCredential { .. } => TYPE_REMOVE_USER_SCRAM_CREDENTIAL,
            MetadataRecord::AccessControlEntry { .. } => TYPE_ACCESS_CONTROL_ENTRY,
            MetadataRecord::RemoveAccessControlEntry { .. } => TYPE_REMOVE_ACCESS_CONTROL_ENTRY,
            MetadataRecord::ClientQuota(_) => TYPE_CLIENT_QUOTA,
        }
    }

    /// Body version written (bump when a body layout changes; decode keeps reading old ones).
    pub fn version(&self) -> u8 {
        match self {
            MetadataRecord::Partition { .. } => 1,
            _ => 0,
        }
    }

    /// Appends the body (no frame) to `buf`.
    pub fn encode_body(&self, buf: &mut Vec<u8>) {
        match self {
            MetadataRecord::Topic { name, topic_id } => {
                put_str(buf, name);
                buf.extend_from_slice(topic_id);
            }
            MetadataRecord::Partition {
                topic_id,
                partition_id,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                shard,
            } => {
                buf.extend_from_slice(topic_id);
                buf.extend_from_slice(&partition_id.to_be_bytes());
                put_ids(buf, replicas);
                buf.extend_from_slice(&leader.to_be_bytes());
                buf.extend_from_slice(&leader_epoch.to_be_bytes());
                buf.extend_from_slice(&shard.to_be_bytes());
                // Version 1.
                put_ids(buf, isr);
                buf.extend_from_slice(&partition_epoch.to_be_bytes());
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition_id,
                leader,
                isr,
                replicas,
            } => {
                buf.extend_from_slice(topic_id);
                buf.extend_from_slice(&partition_id.to_be_bytes());
                buf.extend_from_slice(&leader.to_be_bytes());
                put_optional_ids(buf, isr.as_deref());
                put_optional_ids(buf, replicas.as_deref());
            }
            MetadataRecord::RegisterBroker(b) => {
                buf.extend_from_slice(&b.broker_id.to_be_bytes());
                buf.extend_from_slice(&b.incarnation_id);
                buf.extend_from_slice(&b.broker_epoch.to_be_bytes());
                buf.extend_from_slice(&(b.endpoints.len() as u32).to_be_bytes());
                for e in &b.endpoints {
                    put_str(buf, &e.name);
                    put_str(buf, &e.host);
                    buf.extend_from_slice(&e.port.to_be_bytes());
                    buf.extend_from_slice(&e.security_protocol.to_be_bytes());
                }
                match &b.rack {
                    None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(r) => put_str(buf, r),
                }
                buf.push(u8::from(b.fenced));
                buf.push(u8::from(b.in_controlled_shutdown));
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => {
                buf.extend_from_slice(&broker_id.to_be_bytes());
                buf.extend_from_slice(&broker_epoch.to_be_bytes());
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                buf.extend_from_slice(&broker_id.to_be_bytes());
                buf.extend_from_slice(&broker_epoch.to_be_bytes());
                buf.push(tri_state(*fenced));
                buf.push(tri_state(*in_controlled_shutdown));
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                buf.push(*resource_type as u8);
                put_str(buf, resource_name);
                put_str(buf, name);
                put_nullable_str(buf, value.as_deref());
            }
            MetadataRecord::RemoveTopic { topic_id } => buf.extend_from_slice(topic_id),
            MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id,
            } => {
                buf.extend_from_slice(&broker_id.to_be_bytes());
                buf.extend_from_slice(&broker_epoch.to_be_bytes());
                buf.extend_from_slice(&next_producer_id.to_be_bytes());
            }
            MetadataRecord::UserScramCredential(c) => {
                put_str(buf, &c.name);
                buf.push(c.mechanism as u8);
                put_str_bytes(buf, &c.salt);
                put_str_bytes(buf, &c.stored_key);
                put_str_bytes(buf, &c.server_key);
                buf.extend_from_slice(&c.iterations.to_be_bytes());
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                put_str(buf, name);
                buf.push(*mechanism as u8);
            }
            MetadataRecord::AccessControlEntry { id, binding } => {
                // Kafka's field order: id, resource type, name, pattern type, principal,
                // host, operation, permission type.
                buf.extend_from_slice(id);
                buf.push(binding.pattern.resource_type.code() as u8);
                put_str(buf, &binding.pattern.name);
                buf.push(binding.pattern.pattern_type.code() as u8);
                put_str(buf, &binding.entry.principal);
                put_str(buf, &binding.entry.host);
                buf.push(binding.entry.operation.code() as u8);
                buf.push(binding.entry.permission.code() as u8);
            }
            MetadataRecord::RemoveAccessControlEntry { id } => buf.extend_from_slice(id),
            MetadataRecord::ClientQuota(q) => {
                buf.extend_from_slice(&(q.entity.len() as u32).to_be_bytes());
                for (entity_type, name) in &q.entity {
                    put_str(buf, entity_type);
                    put_nullable_str(buf, name.as_deref());
                }
                put_str(buf, &q.key);
                buf.extend_from_slice(&q.value.to_bits().to_be_bytes());
                buf.push(u8::from(q.remove));
            }
        }
    }

    /// Decodes a body of the given type and version; the whole body must be consumed.
    pub fn decode_body(record_type: u8, version: u8, body: &[u8]) -> Result<Self, DecodeError> {
        if !matches!(
            record_type,
            TYPE_TOPIC
                | TYPE_PARTITION
                | TYPE_CONFIG
                | TYPE_REMOVE_TOPIC
                | TYPE_PRODUCER_IDS
                | TYPE_PARTITION_CHANGE
                | TYPE_REGISTER_BROKER
                | TYPE_UNREGISTER_BROKER
                | TYPE_BROKER_REGISTRATION_CHANGE
                | TYPE_USER_SCRAM_CREDENTIAL
                | TYPE_REMOVE_USER_SCRAM_CREDENTIAL
                | TYPE_ACCESS_CONTROL_ENTRY
                | TYPE_REMOVE_ACCESS_CONTROL_ENTRY
                | TYPE_CLIENT_QUOTA
        ) {
            return Err(DecodeError::UnknownType(record_type));
        }
        let newest = if record_type == TYPE_PARTITION { 1 } else { 0 };
        if version > newest {
            return Err(DecodeError::UnsupportedVersion {
                record_type,
                version,
            });
        }
        let mut r = Reader { buf: body };
        let rec = match record_type {
            TYPE_TOPIC => MetadataRecord::Topic {
                name: r.string()?,
                topic_id: r.uuid()?,
            },
            TYPE_PARTITION => {
                let topic_id = r.uuid()?;
                let partition_id = r.i32()?;
                let replicas = r.ids()?;
                let leader = r.i32()?;
                let leader_epoch = r.i32()?;
                let shard = r.u16()?;
                let (isr, partition_epoch) = if version >= 1 {
                    (r.ids()?, r.i32()?)
                } else {
                    (replicas.clone(), 0)
                };
                MetadataRecord::Partition {
                    topic_id,
                    partition_id,
                    replicas,
                    isr,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    shard,
                }
            }
            TYPE_PARTITION_CHANGE => MetadataRecord::PartitionChange {
                topic_id: r.uuid()?,
                partition_id: r.i32()?,
                leader: r.i32()?,
                isr: r.optional_ids()?,
                replicas: r.optional_ids()?,
            },
            TYPE_REGISTER_BROKER => {
                let broker_id = r.i32()?;
                let incarnation_id = r.uuid()?;
                let broker_epoch = r.i64()?;
                let n = r.u32()? as usize;
                if n > MAX_LIST || n > r.buf.len() {
                    return Err(DecodeError::Malformed("endpoint count"));
                }
                let endpoints = (0..n)
                    .map(|_| {
                        Ok(BrokerEndpoint {
                            name: r.string()?,
                            host: r.string()?,
                            port: r.u16()?,
                            security_protocol: r.u16()? as i16,
                        })
                    })
                    .collect::<Result<Vec<_>, DecodeError>>()?;
                MetadataRecord::RegisterBroker(BrokerRegistration {
                    broker_id,
                    incarnation_id,
                    broker_epoch,
                    endpoints,
                    rack: r.nullable_string()?,
                    fenced: r.bool()?,
                    in_controlled_shutdown: r.bool()?,
                })
            }
            TYPE_UNREGISTER_BROKER => MetadataRecord::UnregisterBroker {
                broker_id: r.i32()?,
                broker_epoch: r.i64()?,
            },
            TYPE_BROKER_REGISTRATION_CHANGE => MetadataRecord::BrokerRegistrationChange {
                broker_id: r.i32()?,
                broker_epoch: r.i64()?,
                fenced: r.tri_state()?,
                in_controlled_shutdown: r.tri_state()?,
            },
            TYPE_CONFIG => MetadataRecord::Config {
                resource_type: r.u8()? as i8,
                resource_name: r.string()?,
                name: r.string()?,
                value: r.nullable_string()?,
            },
            TYPE_PRODUCER_IDS => MetadataRecord::ProducerIds {
                broker_id: r.i32()?,
                broker_epoch: r.i64()?,
                next_producer_id: r.i64()?,
            },
            TYPE_USER_SCRAM_CREDENTIAL => {
                MetadataRecord::UserScramCredential(ScramCredentialRecord {
                    name: r.string()?,
                    mechanism: r.u8()? as i8,
                    salt: r.bytes()?,
                    stored_key: r.bytes()?,
                    server_key: r.bytes()?,
                    iterations: r.i32()?,
                })
            }
            TYPE_REMOVE_USER_SCRAM_CREDENTIAL => MetadataRecord::RemoveUserScramCredential {
                name: r.string()?,
                mechanism: r.u8()? as i8,
            },
            TYPE_ACCESS_CONTROL_ENTRY => {
                let id = r.uuid()?;
                let resource_type = acl::ResourceType::from_code(r.u8()? as i8);
                let name = r.string()?;
                let pattern_type = acl::PatternType::from_code(r.u8()? as i8);
                let principal = r.string()?;
                let host = r.string()?;
                let operation = acl::AclOperation::from_code(r.u8()? as i8);
                let permission = acl::AclPermissionType::from_code(r.u8()? as i8);
                MetadataRecord::AccessControlEntry {
                    id,
                    binding: acl::AclBinding::new(
                        acl::ResourcePattern::new(resource_type, name, pattern_type),
                        acl::AccessControlEntry::new(principal, host, operation, permission),
                    ),
                }
            }
            TYPE_REMOVE_ACCESS_CONTROL_ENTRY => {
                MetadataRecord::RemoveAccessControlEntry { id: r.uuid()? }
            }
            TYPE_CLIENT_QUOTA => {
                let count = r.u32()? as usize;
                if count > MAX_QUOTA_ENTITY_PARTS {
                    return Err(DecodeError::Malformed("quota entity too long"));
                }
                let mut entity = Vec::with_capacity(count);
                for _ in 0..count {
                    entity.push((r.string()?, r.nullable_string()?));
                }
                MetadataRecord::ClientQuota(QuotaRecord {
                    entity,
                    key: r.string()?,
                    value: f64::from_bits(r.i64()? as u64),
                    remove: r.bool()?,
                })
            }
            _ => MetadataRecord::RemoveTopic {
                topic_id: r.uuid()?,
            },
        };
        if !r.buf.is_empty() {
            return Err(DecodeError::Malformed("trailing bytes"));
        }
        Ok(rec)
    }
}

/// Appends one framed entry to `buf`.
pub fn encode_entry(entry: &LogEntry, buf: &mut Vec<u8>) {
    encode_frame(entry.offset, entry.epoch, &entry.record, buf);
}

/// Appends one frame to `buf` (what [`encode_entry`] does, without owning the record).
/// Returns the frame's size.
pub fn encode_frame(offset: u64, epoch: u32, record: &MetadataRecord, buf: &mut Vec<u8>) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; FRAME_PREFIX]);
    buf.push(record.record_type());
    buf.push(record.version());
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(&epoch.to_be_bytes());
    record.encode_body(buf);
    let len = (buf.len() - start - FRAME_PREFIX) as u32;
    let crc = crc32c::crc32c(&buf[start + FRAME_PREFIX..]);
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    buf.len() - start
}

/// Decodes the frame at the start of `buf`: the entry and the bytes it used.
/// `Truncated` means the buffer ends inside the frame (a torn tail); other errors mean the
/// bytes are not a valid frame.
pub fn decode_entry(buf: &[u8]) -> Result<(LogEntry, usize), DecodeError> {
    if buf.len() < FRAME_PREFIX {
        return Err(DecodeError::Truncated);
    }
    let len =
        u32::from_be_bytes(buf[0..4].try_into().expect("a slice of the array's length")) as usize;
    if !(FRAME_HEADER..=MAX_FRAME).contains(&len) {
        return Err(DecodeError::BadLength(len));
    }
    let crc = u32::from_be_bytes(buf[4..8].try_into().expect("a slice of the array's length"));
    let Some(covered) = buf.get(FRAME_PREFIX..FRAME_PREFIX + len) else {
        return Err(DecodeError::Truncated);
    };
    if crc32c::crc32c(covered) != crc {
        return Err(DecodeError::BadCrc);
    }
    let record_type = covered[0];
    let version = covered[1];
    let offset = u64::from_be_bytes(
        covered[2..10]
            .try_into()
            .expect("a slice of the array's length"),
    );
    let epoch = u32::from_be_bytes(
        covered[10..14]
            .try_into()
            .expect("a slice of the array's length"),
    );
    let record = MetadataRecord::decode_body(record_type, version, &covered[FRAME_HEADER..])?;
    Ok((
        LogEntry {
            offset,
            epoch,
            record,
        },
        FRAME_PREFIX + len,
    ))
}

fn put_ids(buf: &mut Vec<u8>, ids: &[i32]) {
    buf.extend_from_slice(&(ids.len() as u32).to_be_bytes());
    for id in ids {
        buf.extend_from_slice(&id.to_be_bytes());
    }
}

/// A nullable list: count -1 is "no change".
fn put_optional_ids(buf: &mut Vec<u8>, ids: Option<&[i32]>) {
    match ids {
        None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(ids) => put_ids(buf, ids),
    }
}

/// Kafka's int8 flags of BrokerRegistrationChangeRecord: 0 unchanged, 1 set, -1 cleared.
fn tri_state(v: Option<bool>) -> u8 {
    match v {
        None => 0,
        Some(true) => 1,
        Some(false) => (-1i8) as u8,
    }
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_str_bytes(buf, s.as_bytes());
}

/// A nullable string: length -1 is null.
fn put_nullable_str(buf: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(s) => put_str(buf, s),
    }
}

/// Bytes framed as a string is: length, then the bytes.
fn put_str_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
    buf.extend_from_slice(b);
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Malformed("body too short"));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(
            self.take(2)?
                .try_into()
                .expect("a slice of the array's length"),
        ))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(
            self.take(4)?
                .try_into()
                .expect("a slice of the array's length"),
        ))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(
            self.take(8)?
                .try_into()
                .expect("a slice of the array's length"),
        ))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.u32()? as i32)
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Malformed("boolean")),
        }
    }
    fn tri_state(&mut self) -> Result<Option<bool>, DecodeError> {
        match self.u8()? as i8 {
            0 => Ok(None),
            1 => Ok(Some(true)),
            -1 => Ok(Some(false)),
            _ => Err(DecodeError::Malformed("flag")),
        }
    }
    /// A list of broker ids, its length bounded by `MAX_LIST` and by the bytes there.
    fn ids(&mut self) -> Result<Vec<i32>, DecodeError> {
        let n = self.u32()? as usize;
        if n > MAX_LIST || n > self.buf.len() / 4 {
            return Err(DecodeError::Malformed("id count"));
        }
        (0..n).map(|_| self.i32()).collect()
    }
    fn optional_ids(&mut self) -> Result<Option<Vec<i32>>, DecodeError> {
        let n = self.i32()?;
        if n == -1 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| DecodeError::Malformed("negative id count"))?;
        if n > MAX_LIST || n > self.buf.len() / 4 {
            return Err(DecodeError::Malformed("id count"));
        }
        (0..n)
            .map(|_| self.i32())
            .collect::<Result<_, _>>()
            .map(Some)
    }
    fn uuid(&mut self) -> Result<TopicId, DecodeError> {
        Ok(self
            .take(16)?
            .try_into()
            .expect("a slice of the array's length"))
    }
    fn str_of_len(&mut self, n: usize) -> Result<String, DecodeError> {
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Malformed("invalid utf-8"))
    }
    /// Bytes framed as [`put_str_bytes`] writes them (the length is checked against what is
    /// left before anything is allocated).
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        let n = self.u32()? as usize;
        self.str_of_len(n)
    }
    fn nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        let n = self.i32()?;
        if n == -1 {
            return Ok(None);
        }
        if n < 0 {
            return Err(DecodeError::Malformed("negative string length"));
        }
        self.str_of_len(n as usize).map(Some)
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
