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
    /// PartitionRecord (apiKey 3), plus the owning shard.
    Partition {
        topic_id: TopicId,
        partition_id: i32,
        replicas: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        shard: u16,
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

const TYPE_TOPIC: u8 = 2;
const TYPE_PARTITION: u8 = 3;
const TYPE_CONFIG: u8 = 4;
const TYPE_REMOVE_TOPIC: u8 = 9;
const TYPE_PRODUCER_IDS: u8 = 15;

impl MetadataRecord {
    /// Kafka metadata apiKey of this record.
    pub fn record_type(&self) -> u8 {
        match self {
            MetadataRecord::Topic { .. } => TYPE_TOPIC,
            MetadataRecord::Partition { .. } => TYPE_PARTITION,
            MetadataRecord::Config { .. } => TYPE_CONFIG,
            MetadataRecord::RemoveTopic { .. } => TYPE_REMOVE_TOPIC,
            MetadataRecord::ProducerIds { .. } => TYPE_PRODUCER_IDS,
        }
    }

    /// Body version written (bump when a body layout changes; decode keeps reading old ones).
    pub fn version(&self) -> u8 {
        0
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
                leader,
                leader_epoch,
                shard,
            } => {
                buf.extend_from_slice(topic_id);
                buf.extend_from_slice(&partition_id.to_be_bytes());
                buf.extend_from_slice(&(replicas.len() as u32).to_be_bytes());
                for r in replicas {
                    buf.extend_from_slice(&r.to_be_bytes());
                }
                buf.extend_from_slice(&leader.to_be_bytes());
                buf.extend_from_slice(&leader_epoch.to_be_bytes());
                buf.extend_from_slice(&shard.to_be_bytes());
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
                match value {
                    None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(v) => put_str(buf, v),
                }
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
        }
    }

    /// Decodes a body of the given type and version; the whole body must be consumed.
    pub fn decode_body(record_type: u8, version: u8, body: &[u8]) -> Result<Self, DecodeError> {
        if !matches!(
            record_type,
            TYPE_TOPIC | TYPE_PARTITION | TYPE_CONFIG | TYPE_REMOVE_TOPIC | TYPE_PRODUCER_IDS
        ) {
            return Err(DecodeError::UnknownType(record_type));
        }
        if version != 0 {
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
                let n = r.u32()? as usize;
                // Bound the allocation by what is actually there.
                if n > r.buf.len() / 4 {
                    return Err(DecodeError::Malformed("replica count"));
                }
                let replicas = (0..n).map(|_| r.i32()).collect::<Result<Vec<_>, _>>()?;
                MetadataRecord::Partition {
                    topic_id,
                    partition_id,
                    replicas,
                    leader: r.i32()?,
                    leader_epoch: r.i32()?,
                    shard: r.u16()?,
                }
            }
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

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u32).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
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
mod tests {
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
                shard: 2,
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition_id: 0,
                replicas: vec![],
                leader: -1,
                leader_epoch: -1,
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
        ]
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
            for ty in [2u8, 3, 4, 9, 0, 255] {
                let _ = MetadataRecord::decode_body(ty, 0, &body);
            }
            // Also as a frame with a valid crc, so the body decoder is reached.
            if body.len() >= FRAME_PREFIX + FRAME_HEADER {
                let n = body.len() - FRAME_PREFIX;
                body[0..4].copy_from_slice(&(n as u32).to_be_bytes());
                body[FRAME_PREFIX] = [2u8, 3, 4, 9][(next() % 4) as usize];
                body[FRAME_PREFIX + 1] = 0;
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
}
