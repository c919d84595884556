//! Broker and topic configuration, in Kafka's `server.properties` format and key names.
//!
//! Everything is driven by two tables of [`Spec`]s ([`BROKER_KEYS`], [`TOPIC_KEYS`]): name,
//! Kafka `ConfigType`, default, validator and (for topic keys) the broker key that provides the
//! default, the same mapping Kafka's `LogConfig` uses (`segment.bytes` <- `log.segment.bytes`, ...).
//! Validation, defaults, DescribeConfigs and topic resolution all read the tables, so adding a
//! key is one table row plus (if it needs a typed field) one line in the builder.
//!
//! Defaults alone give an embedded single node: `node.id=1`,
//! `listeners=PLAINTEXT://127.0.0.1:9092` (Kafka's default binds all interfaces; we don't, on
//! purpose) and `log.dirs=./data`.
//!
//! Example `server.properties`:
//!
//! ```properties
//! # identity
//! node.id=1
//! listeners=PLAINTEXT://:9092
//! advertised.listeners=PLAINTEXT://broker1.example.com:9092
//! log.dirs=/var/lib/broker/data
//! # 0 = one shard per CPU core
//! num.shards=0
//! num.partitions=3
//! log.segment.bytes=1073741824
//! log.retention.hours=168
//! # ack: fsync before acknowledging produce; replication: rely on replicas (Kafka's model)
//! log.flush.policy=ack
//! # accepted and ignored (Kafka thread pools do not apply to a thread-per-core broker)
//! num.network.threads=3
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Errors loading or validating configuration. Every variant names the offending key so the
/// operator (or a CreateTopics/AlterConfigs client) sees exactly what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Syntax {
        path: String,
        line: usize,
        message: String,
    },
    #[error("override `{0}` is not of the form key=value")]
    BadOverride(String),
    #[error("unknown configuration key `{key}`")]
    UnknownKey { key: String },
    #[error("invalid value `{value}` for configuration `{key}`: expected {expected}")]
    InvalidValue {
        key: String,
        value: String,
        expected: String,
    },
}

impl ConfigError {
    /// The configuration key involved, if any (handlers put it in error messages).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key } | ConfigError::InvalidValue { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// Kafka's DescribeConfigsResponse `ConfigSource` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

/// Kafka's DescribeConfigsResponse `ConfigType` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// One DescribeConfigs result entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub config_type: ConfigType,
    pub documentation: Option<String>,
}

/// When a produce is acknowledged relative to fsync (our key `log.flush.policy` /
/// topic `flush.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// fsync before acknowledging (the only durable choice on a single node).
    #[default]
    Ack,
    /// Kafka's model: rely on replication, flush per flush.messages / flush.ms.
    Replication,
}

impl FlushPolicy {
    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ack" => Some(FlushPolicy::Ack),
            "replication" => Some(FlushPolicy::Replication),
            _ => None,
        }
    }
}

/// Value validators used by the tables.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    None,
    /// Numeric value >= n.
    AtLeast(i64),
    /// Numeric value in [lo, hi].
    Between(i64, i64),
    /// One of (case-insensitive).
    OneOf(&'static [&'static str]),
    /// Non-empty comma list whose items are each one of (case-insensitive).
    ListOf(&'static [&'static str]),
    /// Comma list of `NAME://host:port`.
    Listeners,
    /// Non-empty comma list.
    NonEmptyList,
}

/// One row of a key table.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `None` = Kafka's `null` default.
    pub default: Option<&'static str>,
    pub check: Check,
    /// Topic keys only: the broker key supplying the default.
    pub broker_key: Option<&'static str>,
    pub doc: &'static str,
}

const fn spec(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        ty,
        default,
        check,
        broker_key: None,
        doc,
    }
}

const fn tspec(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    broker_key: Option<&'static str>,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        ty,
        default,
        check,
        broker_key,
        doc,
    }
}

const LONG_MAX: &str = "9223372036854775807";
const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const CLEANUP: &[&str] = &["delete", "compact"];
const TS_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const FLUSH: &[&str] = &["ack", "replication"];

use ConfigType as T;

/// Broker keys we understand. All are static (read-only in DescribeConfigs).
pub const BROKER_KEYS: &[Spec] = &[
    spec(
        "node.id",
        T::Int,
        Some("1"),
        Check::AtLeast(0),
        "The node id of this server.",
    ),
    spec(
        "broker.id",
        T::Int,
        None,
        Check::AtLeast(0),
        "Legacy alias of node.id (node.id wins).",
    ),
    spec(
        "listeners",
        T::String,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Check::Listeners,
        "Comma list of NAME://host:port to listen on (empty host = all interfaces).",
    ),
    spec(
        "advertised.listeners",
        T::String,
        None,
        Check::Listeners,
        "Listeners published to clients; defaults to listeners.",
    ),
    spec(
        "log.dirs",
        T::List,
        Some("./data"),
        Check::NonEmptyList,
        "Data directories (only the first one is used).",
    ),
    spec(
        "log.dir",
        T::String,
        None,
        Check::NonEmptyList,
        "Used when log.dirs is not set.",
    ),
    spec(
        "num.partitions",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default number of partitions per topic.",
    ),
    spec(
        "default.replication.factor",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default replication factor for created topics.",
    ),
    spec(
        "auto.create.topics.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Create topics on first metadata request/produce.",
    ),
    spec(
        "log.segment.bytes",
        T::Int,
        Some("1073741824"),
        Check::AtLeast(14),
        "Maximum size of a single log segment file.",
    ),
    spec(
        "log.roll.ms",
        T::Long,
        None,
        Check::AtLeast(1),
        "Maximum segment age before rolling; log.roll.hours if unset.",
    ),
    spec(
        "log.roll.hours",
        T::Int,
        Some("168"),
        Check::AtLeast(1),
        "Maximum segment age before rolling, in hours.",
    ),
    spec(
        "log.index.interval.bytes",
        T::Int,
        Some("4096"),
        Check::AtLeast(0),
        "Bytes between offset index entries.",
    ),
    spec(
        "log.index.size.max.bytes",
        T::Int,
        Some("10485760"),
        Check::AtLeast(4),
        "Maximum size of an offset index file.",
    ),
    spec(
        "message.max.bytes",
        T::Int,
        Some("1048588"),
        Check::AtLeast(0),
        "Largest record batch size allowed.",
    ),
    spec(
        "socket.request.max.bytes",
        T::Int,
        Some("104857600"),
        Check::AtLeast(1),
        "Largest request size accepted on a socket.",
    ),
    spec(
        "fetch.max.bytes",
        T::Int,
        Some("57671680"),
        Check::AtLeast(1024),
        "Most record bytes one Fetch response carries, whatever the request's max_bytes.",
    ),
    spec(
        "log.retention.ms",
        T::Long,
        None,
        Check::AtLeast(-1),
        "Retention time (-1 = unlimited); falls back to minutes, then hours.",
    ),
    spec(
        "log.retention.minutes",
        T::Int,
        None,
        Check::AtLeast(-1),
        "Retention time in minutes.",
    ),
    spec(
        "log.retention.hours",
        T::Int,
        Some("168"),
        Check::AtLeast(-1),
        "Retention time in hours.",
    ),
    spec(
        "log.retention.bytes",
        T::Long,
        Some("-1"),
        Check::None,
        "Maximum partition size before deleting old segments (-1 = unlimited).",
    ),
    spec(
        "producer.id.expiration.ms",
        T::Int,
        Some("86400000"),
        Check::AtLeast(1),
        "Time an idempotent producer's state is kept after its last batch.",
    ),
    spec(
        "log.retention.check.interval.ms",
        T::Long,
        Some("300000"),
        Check::AtLeast(1),
        "How often each shard applies retention.ms / retention.bytes.",
    ),
    spec(
        "log.flush.interval.messages",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
        "Messages accumulated before forcing a flush (replication flush policy).",
    ),
    spec(
        "log.flush.interval.ms",
        T::Long,
        None,
        Check::AtLeast(0),
        "Maximum time before forcing a flush (null = never).",
    ),
    spec(
        "log.flush.policy",
        T::String,
        Some("ack"),
        Check::OneOf(FLUSH),
        "ack: fsync before acknowledging produce; replication: flush by interval only.",
    ),
    spec(
        "log.cleanup.policy",
        T::List,
        Some("delete"),
        Check::ListOf(CLEANUP),
        "Default cleanup policy for topics.",
    ),
    spec(
        "compression.type",
        T::String,
        Some("producer"),
        Check::OneOf(COMPRESSION),
        "Default compression type for topics.",
    ),
    spec(
        "log.message.timestamp.type",
        T::String,
        Some("CreateTime"),
        Check::OneOf(TS_TYPES),
        "Default timestamp type for topics.",
    ),
    spec(
        "log.message.timestamp.before.max.ms",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(0),
        "Default message.timestamp.before.max.ms for topics.",
    ),
    spec(
        "log.message.timestamp.after.max.ms",
        T::Long,
        Some("3600000"),
        Check::AtLeast(0),
        "Default message.timestamp.after.max.ms for topics.",
    ),
    spec(
        "min.insync.replicas",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default min.insync.replicas for topics.",
    ),
    spec(
        "delete.topic.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Whether DeleteTopics is allowed.",
    ),
    spec(
        "num.shards",
        T::Int,
        Some("0"),
        Check::Between(0, u16::MAX as i64),
        "Number of shards (cores); 0 = one per CPU core.",
    ),
    spec(
        "cluster.id",
        T::String,
        None,
        Check::None,
        "Cluster id (generated if unset).",
    ),
    spec(
        "connections.max.idle.ms",
        T::Long,
        Some("600000"),
        Check::AtLeast(-1),
        "Close connections with no bytes read or written for this long (-1 or 0 = never).",
    ),
    spec(
        "max.connections",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(0),
        "Open connections, all listeners; capped at 3/4 of RLIMIT_NOFILE. Extra ones are closed at once.",
    ),
    spec(
        "max.connections.per.ip",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(0),
        "Open connections from one client IP. Extra ones are closed at once.",
    ),
    spec(
        "queued.max.requests",
        T::Int,
        Some("500"),
        Check::AtLeast(1),
        "Requests of one connection read and not yet answered before it stops reading (per connection, not per broker).",
    ),
    spec(
        "queued.max.request.bytes",
        T::Long,
        Some("-1"),
        Check::AtLeast(-1),
        "Bytes of requests and unwritten responses one shard holds before it stops reading sockets (-1 or 0 = 67108864).",
    ),
    spec(
        "offsets.topic.num.partitions",
        T::Int,
        Some("50"),
        Check::Between(1, 1000),
        "Partitions of __consumer_offsets, created on first use (a group's coordinator is the owner of its partition).",
    ),
    spec(
        "offsets.topic.segment.bytes",
        T::Int,
        Some("104857600"),
        Check::AtLeast(1),
        "Segment size of __consumer_offsets.",
    ),
    spec(
        "offsets.retention.minutes",
        T::Int,
        Some("10080"),
        Check::AtLeast(1),
        "Committed offsets of a group that has been empty this long are deleted.",
    ),
    spec(
        "offsets.retention.check.interval.ms",
        T::Long,
        Some("600000"),
        Check::AtLeast(1),
        "How often expired committed offsets are looked for.",
    ),
    spec(
        "offset.metadata.max.bytes",
        T::Int,
        Some("4096"),
        Check::AtLeast(0),
        "Largest metadata string of an offset commit (OFFSET_METADATA_TOO_LARGE above it).",
    ),
    spec(
        "group.initial.rebalance.delay.ms",
        T::Int,
        Some("3000"),
        Check::AtLeast(0),
        "How long the first rebalance of an empty classic group waits for more members to join.",
    ),
    spec(
        "group.min.session.timeout.ms",
        T::Int,
        Some("6000"),
        Check::AtLeast(0),
        "Smallest session timeout a classic group member may ask for.",
    ),
    spec(
        "group.max.session.timeout.ms",
        T::Int,
        Some("1800000"),
        Check::AtLeast(0),
        "Largest session timeout a classic group member may ask for.",
    ),
    spec(
        "group.max.size",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(1),
        "Most members of one classic group (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    spec(
        "group.consumer.session.timeout.ms",
        T::Int,
        Some("45000"),
        Check::AtLeast(1),
        "A KIP-848 consumer group member that does not heartbeat for this long is fenced.",
    ),
    spec(
        "group.consumer.heartbeat.interval.ms",
        T::Int,
        Some("5000"),
        Check::AtLeast(1),
        "Heartbeat interval told to KIP-848 consumer group members.",
    ),
    spec(
        "group.consumer.max.size",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(1),
        "Most members of one KIP-848 consumer group (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    spec(
        "group.consumer.assignors",
        T::List,
        Some("uniform,range"),
        Check::ListOf(&["uniform", "range"]),
        "Broker-side assignors of KIP-848 consumer groups; the first is the default.",
    ),
];

/// Kafka keys commonly found in `server.properties` that mean nothing to us (thread pools,
/// KRaft controller wiring, internal-topic replication): accepted and logged as ignored so an
/// existing Kafka config loads.
pub const IGNORED_KEYS: &[&str] = &[
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "process.roles",
    "controller.quorum.voters",
    "controller.listener.names",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
];

/// Topic keys (Kafka's `TopicConfig` names). Defaults are Kafka's; `broker_key` supplies the
/// default when present in [`BROKER_KEYS`].
pub const TOPIC_KEYS: &[Spec] = &[
    tspec(
        "cleanup.policy",
        T::List,
        Some("delete"),
        Check::ListOf(CLEANUP),
        Some("log.cleanup.policy"),
        "delete and/or compact; retention only deletes with delete (compaction not implemented yet).",
    ),
    tspec(
        "compression.type",
        T::String,
        Some("producer"),
        Check::OneOf(COMPRESSION),
        Some("compression.type"),
        "Final compression type for the topic.",
    ),
    tspec(
        "delete.retention.ms",
        T::Long,
        Some("86400000"),
        Check::AtLeast(0),
        None,
        "Retention of delete tombstones for compacted topics.",
    ),
    tspec(
        "file.delete.delay.ms",
        T::Long,
        Some("60000"),
        Check::AtLeast(0),
        None,
        "Delay before deleting a file from the filesystem.",
    ),
    tspec(
        "flush.messages",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
        Some("log.flush.interval.messages"),
        "Messages between forced fsyncs.",
    ),
    tspec(
        "flush.ms",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(0),
        Some("log.flush.interval.ms"),
        "Milliseconds between forced fsyncs.",
    ),
    tspec(
        "flush.policy",
        T::String,
        Some("ack"),
        Check::OneOf(FLUSH),
        Some("log.flush.policy"),
        "ack: fsync before acknowledging; replication: by interval.",
    ),
    tspec(
        "index.interval.bytes",
        T::Int,
        Some("4096"),
        Check::AtLeast(0),
        Some("log.index.interval.bytes"),
        "Bytes between offset index entries.",
    ),
    tspec(
        "max.compaction.lag.ms",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
        None,
        "Maximum time a message remains ineligible for compaction.",
    ),
    tspec(
        "max.message.bytes",
        T::Int,
        Some("1048588"),
        Check::AtLeast(0),
        Some("message.max.bytes"),
        "Largest record batch size allowed.",
    ),
    tspec(
        "message.timestamp.type",
        T::String,
        Some("CreateTime"),
        Check::OneOf(TS_TYPES),
        Some("log.message.timestamp.type"),
        "CreateTime or LogAppendTime.",
    ),
    tspec(
        "message.timestamp.before.max.ms",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(0),
        Some("log.message.timestamp.before.max.ms"),
        "Allowed timestamp lag behind broker time (CreateTime).",
    ),
    tspec(
        "message.timestamp.after.max.ms",
        T::Long,
        Some("3600000"),
        Check::AtLeast(0),
        Some("log.message.timestamp.after.max.ms"),
        "Allowed timestamp lead over broker time (CreateTime; Kafka 4.0's default, 1 hour).",
    ),
    tspec(
        "min.cleanable.dirty.ratio",
        T::Double,
        Some("0.5"),
        Check::None,
        None,
        "Dirty ratio before compaction.",
    ),
    tspec(
        "min.compaction.lag.ms",
        T::Long,
        Some("0"),
        Check::AtLeast(0),
        None,
        "Minimum time a message remains uncompacted.",
    ),
    tspec(
        "min.insync.replicas",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        Some("min.insync.replicas"),
        "Minimum in-sync replicas for acks=all.",
    ),
    tspec(
        "preallocate",
        T::Boolean,
        Some("false"),
        Check::None,
        None,
        "Preallocate segment files.",
    ),
    tspec(
        "producer.id.expiration.ms",
        T::Int,
        Some("86400000"),
        Check::AtLeast(1),
        Some("producer.id.expiration.ms"),
        "Time an idempotent producer's state is kept after its last batch (a broker config in Kafka; overridable per topic here).",
    ),
    tspec(
        "retention.bytes",
        T::Long,
        Some("-1"),
        Check::None,
        Some("log.retention.bytes"),
        "Maximum partition size before deleting old segments (-1 = unlimited).",
    ),
    tspec(
        "retention.ms",
        T::Long,
        Some("604800000"),
        Check::AtLeast(-1),
        Some("log.retention.ms"),
        "Retention time (-1 = unlimited).",
    ),
    tspec(
        "segment.bytes",
        T::Int,
        Some("1073741824"),
        Check::AtLeast(14),
        Some("log.segment.bytes"),
        "Segment file size.",
    ),
    tspec(
        "segment.index.bytes",
        T::Int,
        Some("10485760"),
        Check::AtLeast(4),
        Some("log.index.size.max.bytes"),
        "Offset index file size.",
    ),
    tspec(
        "segment.jitter.ms",
        T::Long,
        Some("0"),
        Check::AtLeast(0),
        None,
        "Random jitter subtracted from segment.ms.",
    ),
    tspec(
        "segment.ms",
        T::Long,
        Some("604800000"),
        Check::AtLeast(1),
        Some("log.roll.ms"),
        "Maximum segment age before rolling.",
    ),
    tspec(
        "unclean.leader.election.enable",
        T::Boolean,
        Some("false"),
        Check::None,
        None,
        "Allow out-of-sync replicas to become leader.",
    ),
];

/// Broker keys whose effective value is derived from several keys (first set wins): a topic
/// default is "StaticBroker" if any of the family was set explicitly.
const FAMILIES: &[&[&str]] = &[
    &["node.id", "broker.id"],
    &["log.dirs", "log.dir"],
    &["log.roll.ms", "log.roll.hours"],
    &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ],
];

fn find(table: &'static [Spec], key: &str) -> Option<&'static Spec> {
    table.iter().find(|s| s.name == key)
}

fn invalid(spec: &Spec, value: &str, expected: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: spec.name.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

fn list_items(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Validates `value` against the spec's type and check.
fn check_value(spec: &Spec, value: &str) -> Result<(), ConfigError> {
    let v = value.trim();
    let num: Option<i64> = match spec.ty {
        T::Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(invalid(spec, value, "true or false"));
            }
            None
        }
        T::Short => Some(
            v.parse::<i16>()
                .map_err(|_| invalid(spec, value, "a 16-bit integer"))? as i64,
        ),
        T::Int => Some(
            v.parse::<i32>()
                .map_err(|_| invalid(spec, value, "a 32-bit integer"))? as i64,
        ),
        T::Long => Some(
            v.parse::<i64>()
                .map_err(|_| invalid(spec, value, "a 64-bit integer"))?,
        ),
        T::Double => {
            v.parse::<f64>()
                .map_err(|_| invalid(spec, value, "a number"))?;
            None
        }
        _ => None,
    };
    match (spec.check, num) {
        (Check::AtLeast(lo), Some(n)) if n < lo => {
            Err(invalid(spec, value, format!("a value >= {lo}")))
        }
        (Check::Between(lo, hi), Some(n)) if n < lo || n > hi => {
            Err(invalid(spec, value, format!("a value in [{lo}, {hi}]")))
        }
        (Check::OneOf(allowed), _) => {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
                Ok(())
            } else {
                Err(invalid(
                    spec,
                    value,
                    format!("one of {}", allowed.join(", ")),
                ))
            }
        }
        (Check::ListOf(allowed), _) => {
            let items = list_items(v);
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| allowed.iter().any(|a| a.eq_ignore_ascii_case(i)))
            {
                Ok(())
            } else {
                Err(invalid(
                    spec,
                    value,
                    format!("a comma list of {}", allowed.join(", ")),
                ))
            }
        }
        (Check::NonEmptyList, _) if list_items(v).is_empty() => {
            Err(invalid(spec, value, "a non-empty comma list"))
        }
        (Check::Listeners, _) => parse_listeners(spec.name, v).map(|_| ()),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Listeners

/// A parsed `NAME://host:port` listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Listener name (also the security protocol: only PLAINTEXT for now).
    pub name: String,
    /// Host to bind / advertise; empty in the config means `0.0.0.0`. IPv6 without brackets.
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// `host:port`, bracketing IPv6, suitable for `TcpListener::bind`.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Parses a comma list of listeners for `key`.
pub fn parse_listeners(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
    let bad = |expected: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let mut out: Vec<Listener> = Vec::new();
    for item in list_items(value) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| bad("NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092".into()))?;
        let name = name.trim().to_ascii_uppercase();
        match name.as_str() {
            "PLAINTEXT" => {}
            "SSL" | "SASL_PLAINTEXT" | "SASL_SSL" => {
                return Err(bad(format!(
                    "PLAINTEXT listeners (security protocol {name} is not supported yet)"
                )))
            }
            _ => {
                return Err(bad(format!(
                    "PLAINTEXT listeners (listener name {name} is not supported: \
                     listener.security.protocol.map is ignored, name the listener PLAINTEXT)"
                )))
            }
        }
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r
                .split_once("]:")
                .ok_or_else(|| bad("[ipv6]:port".into()))?;
            (h.to_string(), p)
        } else {
            let (h, p) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("NAME://host:port".into()))?;
            if h.contains(':') {
                return Err(bad("IPv6 hosts in brackets: PLAINTEXT://[::1]:9092".into()));
            }
            (h.to_string(), p)
        };
        let port: u16 = port
            .parse()
            .map_err(|_| bad("a port in 0..=65535".into()))?;
        let host = if host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            host
        };
        if out.iter().any(|l| l.name == name) {
            return Err(bad(format!("unique listener names ({name} appears twice)")));
        }
        out.push(Listener { name, host, port });
    }
    if out.is_empty() {
        return Err(bad("at least one NAME://host:port".into()));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Java properties

/// Parses Java-properties text into (key, value, line) in file order (later duplicates win
/// when collected into a map, as in `java.util.Properties`).
pub fn parse_properties(
    path: &str,
    text: &str,
) -> Result<Vec<(String, String, usize)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.split('\n').enumerate();
    while let Some((idx, raw)) = lines.next() {
        let first = raw.strip_suffix('\r').unwrap_or(raw).trim_start();
        // Comment lines are never continued (Java semantics).
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut cur = first.to_string();
        loop {
            let trailing = cur.chars().rev().take_while(|&c| c == '\\').count();
            if trailing % 2 == 1 {
                cur.pop();
                logical.push_str(&cur);
                match lines.next() {
                    Some((_, next)) => {
                        cur = next
                            .strip_suffix('\r')
                            .unwrap_or(next)
                            .trim_start()
                            .to_string()
                    }
                    None => break,
                }
            } else {
                logical.push_str(&cur);
                break;
            }
        }
        let (k, v) = split_key_value(&logical);
        let syntax = |message: String| ConfigError::Syntax {
            path: path.to_string(),
            line: idx + 1,
            message,
        };
        let key = unescape(k).map_err(syntax)?;
        let value = unescape(v).map_err(syntax)?;
        out.push((key, value.trim_end().to_string(), idx + 1));
    }
    Ok(out)
}

/// Splits at the first unescaped `=`, `:` or whitespace (Java rules).
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' => return (&line[..i], line[i + 1..].trim_start()),
            b' ' | b'\t' | b'\x0c' => {
                let rest = line[i..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .map(str::trim_start)
                    .unwrap_or(rest);
                return (&line[..i], rest);
            }
            _ => i += 1,
        }
    }
    (line, "")
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let cp = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("malformed \\u escape `\\u{hex}`"))?;
                out.push(cp);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Broker config

/// The group coordinator's settings, Kafka's keys and defaults.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub offsets_topic_num_partitions: i32,
    pub offsets_topic_segment_bytes: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    /// KIP-848 consumer groups (`group.consumer.*`).
    pub consumer: crate::group::consumer::ConsumerGroupConfig,
}

/// Typed broker configuration. Effective values: aliases and unit variants are already folded
/// (e.g. `log_roll_ms` comes from log.roll.ms or log.roll.hours).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    /// All configured dirs; only `log_dirs[0]` is used (see [`BrokerConfig::data_dir`]).
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub log_segment_bytes: u64,
    pub log_roll_ms: u64,
    pub log_index_interval_bytes: u32,
    pub log_index_size_max_bytes: u32,
    pub message_max_bytes: u32,
    pub socket_request_max_bytes: u32,
    /// Caps every Fetch request's `max_bytes` (Kafka's `fetch.max.bytes`).
    pub fetch_max_bytes: u32,
    /// -1 = unlimited.
    pub log_retention_ms: i64,
    /// -1 = unlimited.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`: period of the retention timer of every shard.
    pub log_retention_check_interval_ms: u64,
    pub log_flush_interval_messages: u64,
    /// `None` = never flush on a timer.
    pub log_flush_interval_ms: Option<u64>,
    pub log_flush_policy: FlushPolicy,
    pub delete_topic_enable: bool,
    /// 0 = one shard per CPU core.
    pub num_shards: u16,
    pub cluster_id: Option<String>,
    /// Idle connections are closed after this long; `None` = never.
    pub connections_max_idle_ms: Option<u64>,
    /// Before the file-descriptor cap (see `limits::ConnectionLimits`).
    pub max_connections: u32,
    pub max_connections_per_ip: u32,
    /// Per connection (see `limits::ConnectionLoad`).
    pub queued_max_requests: u32,
    /// Per shard; <= 0 = `limits::DEFAULT_SHARD_PENDING_BYTES`.
    pub queued_max_request_bytes: i64,
    /// Group coordinator settings (`offsets.*`, `group.*`).
    pub groups: GroupConfig,
    /// Ignored Kafka keys that were present (for the startup log / tests).
    pub ignored: Vec<String>,
    /// Keys explicitly set (file or overrides), canonical spelling, raw values.
    explicit: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::from_explicit(BTreeMap::new(), Vec::new()).expect("defaults are valid")
    }
}

/// Loads the properties file (if any), then applies `key=value` overrides (command line).
pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<BrokerConfig, ConfigError> {
    let mut entries: Vec<(String, String)> = Vec::new();
    if let Some(p) = path {
        let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let name = p.display().to_string();
        for (k, v, _line) in parse_properties(&name, &text)? {
            entries.push((k, v));
        }
    }
    for o in overrides {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOverride(o.clone()))?;
        entries.push((k.trim().to_string(), v.trim().to_string()));
    }
    from_pairs(entries)
}

/// Builds a config from (key, value) pairs, later pairs winning.
pub fn from_pairs(
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<BrokerConfig, ConfigError> {
    let mut explicit = BTreeMap::new();
    let mut ignored = Vec::new();
    for (k, v) in pairs {
        let k = k.trim().to_string();
        if IGNORED_KEYS.contains(&k.as_str()) {
            tracing::info!(key = %k, value = %v, "ignoring Kafka config key (not applicable)");
            if !ignored.contains(&k) {
                ignored.push(k);
            }
            continue;
        }
        let spec =
            find(BROKER_KEYS, &k).ok_or_else(|| ConfigError::UnknownKey { key: k.clone() })?;
        // Empty value on a null-default key means "unset" (e.g. `cluster.id=`).
        if v.trim().is_empty() && spec.default.is_none() {
            explicit.remove(&k);
            continue;
        }
        check_value(spec, &v)?;
        explicit.insert(k, v.trim().to_string());
    }
    BrokerConfig::from_explicit(explicit, ignored)
}

impl BrokerConfig {
    fn from_explicit(
        explicit: BTreeMap<String, String>,
        ignored: Vec<String>,
    ) -> Result<Self, ConfigError> {
        let get = |k: &str| -> Option<&str> {
            explicit
                .get(k)
                .map(String::as_str)
                .or_else(|| find(BROKER_KEYS, k).and_then(|s| s.default))
        };
        let set = |k: &str| explicit.get(k).map(String::as_str);
        // Values were validated by check_value, so these parses only fail on a table bug;
        // still report rather than panic.
        fn num<N: std::str::FromStr>(k: &str, v: Option<&str>) -> Result<N, ConfigError> {
            let v = v.unwrap_or("");
            v.trim().parse().map_err(|_| ConfigError::InvalidValue {
                key: k.into(),
                value: v.into(),
                expected: "a number".into(),
            })
        }
        let boolean = |k: &str| get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));

        let node_id = match set("node.id").or(set("broker.id")) {
            Some(v) => num("node.id", Some(v))?,
            None => num("node.id", get("node.id"))?,
        };
        let listeners = parse_listeners("listeners", get("listeners").unwrap_or_default())?;
        let advertised_listeners = match set("advertised.listeners") {
            Some(v) => {
                let l = parse_listeners("advertised.listeners", v)?;
                if let Some(bad) = l.iter().find(|l| l.host == "0.0.0.0" || l.host == "::") {
                    return Err(ConfigError::InvalidValue {
                        key: "advertised.listeners".into(),
                        value: v.into(),
                        expected: format!("a host clients can connect to, not {}", bad.host),
                    });
                }
                l
            }
            None => listeners.clone(),
        };
        let dirs = set("log.dirs")
            .or(set("log.dir"))
            .or(get("log.dirs"))
            .unwrap_or("./data");
        let log_dirs = list_items(dirs).into_iter().map(PathBuf::from).collect();
        let log_roll_ms = match set("log.roll.ms") {
            Some(v) => num("log.roll.ms", Some(v))?,
            None => num::<u64>("log.roll.hours", get("log.roll.hours"))? * 3_600_000,
        };
        let log_retention_ms: i64 = if let Some(v) = set("log.retention.ms") {
            num("log.retention.ms", Some(v))?
        } else if let Some(v) = set("log.retention.minutes") {
            num::<i64>("log.retention.minutes", Some(v))? * 60_000
        } else {
            num::<i64>("log.retention.hours", get("log.retention.hours"))? * 3_600_000
        };
        let log_flush_interval_ms = match set("log.flush.interval.ms") {
            Some(v) => Some(num("log.flush.interval.ms", Some(v))?),
            None => None,
        };
        Ok(BrokerConfig {
            node_id,
            listeners,
            advertised_listeners,
            log_dirs,
            num_partitions: num("num.partitions", get("num.partitions"))?,
            default_replication_factor: num::<i32>(
                "default.replication.factor",
                get("default.replication.factor"),
            )?
            .clamp(1, i16::MAX as i32) as i16,
            auto_create_topics_enable: boolean("auto.create.topics.enable"),
            log_segment_bytes: num("log.segment.bytes", get("log.segment.bytes"))?,
            log_roll_ms,
            log_index_interval_bytes: num(
                "log.index.interval.bytes",
                get("log.index.interval.bytes"),
            )?,
            log_index_size_max_bytes: num(
                "log.index.size.max.bytes",
                get("log.index.size.max.bytes"),
            )?,
            message_max_bytes: num("message.max.bytes", get("message.max.bytes"))?,
            socket_request_max_bytes: num(
                "socket.request.max.bytes",
                get("socket.request.max.bytes"),
            )?,
            fetch_max_bytes: num("fetch.max.bytes", get("fetch.max.bytes"))?,
            groups: GroupConfig {
                offsets_topic_num_partitions: num(
                    "offsets.topic.num.partitions",
                    get("offsets.topic.num.partitions"),
                )?,
                offsets_topic_segment_bytes: num(
                    "offsets.topic.segment.bytes",
                    get("offsets.topic.segment.bytes"),
                )?,
                offsets_retention_ms: num::<i64>(
                    "offsets.retention.minutes",
                    get("offsets.retention.minutes"),
                )? * 60_000,
                offsets_retention_check_interval_ms: num(
                    "offsets.retention.check.interval.ms",
                    get("offsets.retention.check.interval.ms"),
                )?,
                offset_metadata_max_bytes: num(
                    "offset.metadata.max.bytes",
                    get("offset.metadata.max.bytes"),
                )?,
                initial_rebalance_delay_ms: num(
                    "group.initial.rebalance.delay.ms",
                    get("group.initial.rebalance.delay.ms"),
                )?,
                min_session_timeout_ms: num(
                    "group.min.session.timeout.ms",
                    get("group.min.session.timeout.ms"),
                )?,
                max_session_timeout_ms: num(
                    "group.max.session.timeout.ms",
                    get("group.max.session.timeout.ms"),
                )?,
                max_size: num("group.max.size", get("group.max.size"))?,
                consumer: crate::group::consumer::ConsumerGroupConfig {
                    session_timeout_ms: num(
                        "group.consumer.session.timeout.ms",
                        get("group.consumer.session.timeout.ms"),
                    )?,
                    heartbeat_interval_ms: num(
                        "group.consumer.heartbeat.interval.ms",
                        get("group.consumer.heartbeat.interval.ms"),
                    )?,
                    max_size: num("group.consumer.max.size", get("group.consumer.max.size"))?,
                    assignors: get("group.consumer.assignors")
                        .unwrap_or("uniform,range")
                        .split(',')
                        .filter_map(|name| {
                            crate::group::assignor::Assignor::from_name(
                                &name.trim().to_ascii_lowercase(),
                            )
                        })
                        .collect(),
                },
            },
            log_retention_ms: if log_retention_ms < 0 {
                -1
            } else {
                log_retention_ms
            },
            log_retention_bytes: num("log.retention.bytes", get("log.retention.bytes"))?,
            log_retention_check_interval_ms: num(
                "log.retention.check.interval.ms",
                get("log.retention.check.interval.ms"),
            )?,
            log_flush_interval_messages: num(
                "log.flush.interval.messages",
                get("log.flush.interval.messages"),
            )?,
            log_flush_interval_ms,
            log_flush_policy: FlushPolicy::parse(get("log.flush.policy").unwrap_or("ack"))
                .unwrap_or_default(),
            delete_topic_enable: boolean("delete.topic.enable"),
            num_shards: num("num.shards", get("num.shards"))?,
            cluster_id: set("cluster.id").map(str::to_string),
            connections_max_idle_ms: Some(num::<i64>(
                "connections.max.idle.ms",
                get("connections.max.idle.ms"),
            )?)
            .filter(|ms| *ms > 0)
            .map(|ms| ms as u64),
            max_connections: num("max.connections", get("max.connections"))?,
            max_connections_per_ip: num("max.connections.per.ip", get("max.connections.per.ip"))?,
            queued_max_requests: num("queued.max.requests", get("queued.max.requests"))?,
            queued_max_request_bytes: num(
                "queued.max.request.bytes",
                get("queued.max.request.bytes"),
            )?,
            ignored,
            explicit,
        })
    }

    /// The data directory in use (first of log.dirs).
    pub fn data_dir(&self) -> &Path {
        &self.log_dirs[0]
    }

    /// Whether `key` (or a key of its alias/unit family) was set in the file or overrides.
    pub fn is_set(&self, key: &str) -> bool {
        match FAMILIES.iter().find(|f| f.contains(&key)) {
            Some(family) => family.iter().any(|k| self.explicit.contains_key(*k)),
            None => self.explicit.contains_key(key),
        }
    }

    /// Raw value of a broker key: as set, else its default (`None` = null / unknown key).
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.explicit
            .get(key)
            .map(String::as_str)
            .or_else(|| find(BROKER_KEYS, key).and_then(|s| s.default))
    }

    /// Effective value of a broker key as a string, folding families (log.roll.ms from hours,
    /// ...); this is what a topic inherits.
    pub fn effective(&self, key: &str) -> Option<String> {
        match key {
            "node.id" => Some(self.node_id.to_string()),
            "log.roll.ms" => Some(self.log_roll_ms.to_string()),
            "log.retention.ms" => Some(self.log_retention_ms.to_string()),
            // Kafka's flush.ms default is Long.MAX when the broker key is null.
            "log.flush.interval.ms" => Some(
                self.log_flush_interval_ms
                    .map_or(LONG_MAX.into(), |v| v.to_string()),
            ),
            _ => self.raw(key).map(str::to_string),
        }
    }
}

/// DescribeConfigs for the broker: every broker key we know; all static, hence read-only.
pub fn describe_broker(broker: &BrokerConfig) -> Vec<ConfigEntry> {
    BROKER_KEYS
        .iter()
        .map(|s| ConfigEntry {
            name: s.name.to_string(),
            value: broker.raw(s.name).map(str::to_string),
            source: if broker.explicit.contains_key(s.name) {
                ConfigSource::StaticBroker
            } else {
                ConfigSource::Default
            },
            read_only: true,
            sensitive: s.ty == T::Password,
            config_type: s.ty,
            documentation: Some(s.doc.to_string()),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Topic config

/// Effective configuration of one topic (override > broker default > Kafka default).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: Vec<String>,
    pub compression_type: String,
    pub segment_bytes: u64,
    pub segment_ms: u64,
    pub segment_index_bytes: u32,
    pub index_interval_bytes: u32,
    pub max_message_bytes: u32,
    /// -1 = unlimited.
    pub retention_ms: i64,
    /// -1 = unlimited.
    pub retention_bytes: i64,
    pub flush_messages: u64,
    pub flush_ms: u64,
    pub flush_policy: FlushPolicy,
    /// "CreateTime" or "LogAppendTime".
    pub message_timestamp_type: String,
    /// `message.timestamp.before.max.ms`: CreateTime stamps further behind are refused.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: CreateTime stamps further ahead are refused.
    pub message_timestamp_after_max_ms: i64,
    pub min_insync_replicas: i32,
    pub producer_id_expiration_ms: i64,
}

/// Checks topic overrides (CreateTopics / AlterConfigs): unknown key or bad value -> error
/// (the handler maps it to INVALID_CONFIG).
pub fn validate_topic_overrides(overrides: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (k, v) in overrides {
        let spec = find(TOPIC_KEYS, k).ok_or_else(|| ConfigError::UnknownKey { key: k.clone() })?;
        check_value(spec, v)?;
    }
    Ok(())
}

/// (spec, value in force, source) for every topic key.
fn topic_values(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(&'static Spec, Option<String>, ConfigSource)> {
    TOPIC_KEYS
        .iter()
        .map(|s| {
            if let Some(v) = overrides.get(s.name) {
                return (s, Some(v.trim().to_string()), ConfigSource::DynamicTopic);
            }
            let from_broker = s.broker_key.filter(|bk| find(BROKER_KEYS, bk).is_some());
            match from_broker {
                Some(bk) => {
                    let src = if broker.is_set(bk) {
                        ConfigSource::StaticBroker
                    } else {
                        ConfigSource::Default
                    };
                    (s, broker.effective(bk).or(s.default.map(Into::into)), src)
                }
                None => (s, s.default.map(Into::into), ConfigSource::Default),
            }
        })
        .collect()
}

/// Resolves a topic's effective config (override > broker default > Kafka default).
pub fn resolve(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<TopicConfig, ConfigError> {
    validate_topic_overrides(overrides)?;
    let vals: BTreeMap<&str, String> = topic_values(broker, overrides)
        .into_iter()
        .filter_map(|(s, v, _)| v.map(|v| (s.name, v)))
        .collect();
    let get = |k: &str| vals.get(k).map(String::as_str).unwrap_or("");
    fn num<N: std::str::FromStr>(k: &str, v: &str) -> Result<N, ConfigError> {
        v.trim().parse().map_err(|_| ConfigError::InvalidValue {
            key: k.into(),
            value: v.into(),
            expected: "a non-negative number in range".into(),
        })
    }
    let n = |k: &str| get(k);
    Ok(TopicConfig {
        cleanup_policy: list_items(n("cleanup.policy"))
            .iter()
            .map(|s| s.to_ascii_lowercase())
            .collect(),
        compression_type: n("compression.type").to_ascii_lowercase(),
        segment_bytes: num("segment.bytes", n("segment.bytes"))?,
        segment_ms: num("segment.ms", n("segment.ms"))?,
        segment_index_bytes: num("segment.index.bytes", n("segment.index.bytes"))?,
        index_interval_bytes: num("index.interval.bytes", n("index.interval.bytes"))?,
        max_message_bytes: num("max.message.bytes", n("max.message.bytes"))?,
        retention_ms: num::<i64>("retention.ms", n("retention.ms"))?.max(-1),
        retention_bytes: num("retention.bytes", n("retention.bytes"))?,
        flush_messages: num("flush.messages", n("flush.messages"))?,
        flush_ms: num("flush.ms", n("flush.ms"))?,
        flush_policy: FlushPolicy::parse(n("flush.policy")).unwrap_or_default(),
        message_timestamp_type: if n("message.timestamp.type").eq_ignore_ascii_case("LogAppendTime")
        {
            "LogAppendTime".into()
        } else {
            "CreateTime".into()
        },
        message_timestamp_before_max_ms: num(
            "message.timestamp.before.max.ms",
            n("message.timestamp.before.max.ms"),
        )?,
        message_timestamp_after_max_ms: num(
            "message.timestamp.after.max.ms",
            n("message.timestamp.after.max.ms"),
        )?,
        min_insync_replicas: num("min.insync.replicas", n("min.insync.replicas"))?,
        producer_id_expiration_ms: num(
            "producer.id.expiration.ms",
            n("producer.id.expiration.ms"),
        )?,
    })
}

/// DescribeConfigs for a topic: every topic key with the value in force and its source.
/// Invalid overrides (should not happen: they are validated on the way in) are shown as-is.
pub fn describe_topic(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    topic_values(broker, overrides)
        .into_iter()
        .map(|(s, value, source)| ConfigEntry {
            name: s.name.to_string(),
            value,
            source,
            read_only: false,
            sensitive: s.ty == T::Password,
            config_type: s.ty,
            documentation: Some(s.doc.to_string()),
        })
        .collect()
}

/// Names of all topic keys (e.g. for DescribeConfigs with a key filter).
pub fn topic_key_names() -> impl Iterator<Item = &'static str> {
    TOPIC_KEYS.iter().map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults() {
        let c = load(None, &[]).unwrap();
        assert_eq!(c.node_id, 1);
        assert_eq!(
            c.listeners,
            vec![Listener {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092
            }]
        );
        assert_eq!(c.advertised_listeners, c.listeners);
        assert_eq!(c.data_dir(), Path::new("./data"));
        assert_eq!(c.num_partitions, 1);
        assert_eq!(c.default_replication_factor, 1);
        assert!(c.auto_create_topics_enable);
        assert_eq!(c.log_segment_bytes, 1 << 30);
        assert_eq!(c.log_roll_ms, 168 * 3_600_000);
        assert_eq!(c.log_retention_ms, 168 * 3_600_000);
        assert_eq!(c.log_retention_bytes, -1);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.log_flush_interval_messages, u64::MAX >> 1);
        assert_eq!(c.log_flush_interval_ms, None);
        assert_eq!(c.log_flush_policy, FlushPolicy::Ack);
        assert_eq!(c.message_max_bytes, 1048588);
        assert_eq!(c.num_shards, 0);
        assert!(c.cluster_id.is_none());
        let d = BrokerConfig::default();
        assert_eq!(d.node_id, 1);
    }

    #[test]
    fn properties_syntax() {
        let text = "# comment\n! also comment\n  node.id = 7  \nlisteners: PLAINTEXT://:9093\n\
                    log.dirs=/a/b,\\\n    /c/d\nlog.flush.policy replication\r\n\
                    cluster.id=ab\\u0063\\\\x\nnum.io.threads=8\n# trailing \\\nnum.partitions=3\n";
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("server.properties");
        std::fs::write(&p, text).unwrap();
        let c = load(Some(&p), &["num.partitions=5".into(), "broker.id=9".into()]).unwrap();
        assert_eq!(c.node_id, 7, "node.id wins over broker.id");
        assert_eq!(c.listeners[0].host, "0.0.0.0");
        assert_eq!(c.listeners[0].port, 9093);
        assert_eq!(
            c.log_dirs,
            vec![PathBuf::from("/a/b"), PathBuf::from("/c/d")]
        );
        assert_eq!(c.log_flush_policy, FlushPolicy::Replication);
        assert_eq!(c.cluster_id.as_deref(), Some("abc\\x"));
        assert_eq!(c.num_partitions, 5, "override wins over file");
        assert_eq!(c.ignored, vec!["num.io.threads".to_string()]);
    }

    #[test]
    fn retention_check_interval_is_a_real_key() {
        let c = load(None, &["log.retention.check.interval.ms=500".into()]).unwrap();
        assert_eq!(c.log_retention_check_interval_ms, 500);
        assert!(c.ignored.is_empty());
        assert!(load(None, &["log.retention.check.interval.ms=0".into()]).is_err());
    }

    #[test]
    fn aliases_and_units() {
        let c = load(
            None,
            &[
                "broker.id=4".into(),
                "log.dir=/x".into(),
                "log.roll.hours=1".into(),
                "log.retention.minutes=2".into(),
                "log.flush.interval.ms=50".into(),
            ],
        )
        .unwrap();
        assert_eq!(c.node_id, 4);
        assert_eq!(c.data_dir(), Path::new("/x"));
        assert_eq!(c.log_roll_ms, 3_600_000);
        assert_eq!(c.log_retention_ms, 120_000);
        assert_eq!(c.log_flush_interval_ms, Some(50));
        let c = load(
            None,
            &["log.retention.ms=-1".into(), "log.retention.hours=1".into()],
        )
        .unwrap();
        assert_eq!(c.log_retention_ms, -1);
    }

    #[test]
    fn errors_name_the_key() {
        let e = load(None, &["no.such.key=1".into()]).unwrap_err();
        assert_eq!(e.key(), Some("no.such.key"));
        let e = load(None, &["log.segment.bytes=10".into()]).unwrap_err();
        assert_eq!(e.key(), Some("log.segment.bytes"));
        assert!(e.to_string().contains(">= 14"), "{e}");
        let e = load(None, &["num.partitions=abc".into()]).unwrap_err();
        assert!(e.to_string().contains("num.partitions"));
        let e = load(None, &["listeners=SSL://:9093".into()]).unwrap_err();
        assert_eq!(e.key(), Some("listeners"));
        assert!(e.to_string().contains("SSL"), "{e}");
        let e = load(None, &["advertised.listeners=PLAINTEXT://:9092".into()]).unwrap_err();
        assert_eq!(e.key(), Some("advertised.listeners"));
        assert!(matches!(
            load(None, &["novalue".into()]),
            Err(ConfigError::BadOverride(_))
        ));
        assert!(load(None, &["auto.create.topics.enable=yes".into()]).is_err());
        assert!(load(None, &["log.flush.policy=sometimes".into()]).is_err());
        assert!(load(None, &["num.shards=70000".into()]).is_err());
        assert!(matches!(
            load(Some(Path::new("/nonexistent/x")), &[]),
            Err(ConfigError::Io { .. })
        ));
    }

    #[test]
    fn listeners_parse() {
        let l = parse_listeners("listeners", "PLAINTEXT://[::1]:9092").unwrap();
        assert_eq!(l[0].host, "::1");
        assert_eq!(l[0].addr(), "[::1]:9092");
        assert!(parse_listeners("listeners", "PLAINTEXT://h:99999").is_err());
        assert!(parse_listeners("listeners", "PLAINTEXT://h:1,PLAINTEXT://h:2").is_err());
        assert!(parse_listeners("listeners", "EXTERNAL://h:1").is_err());
        assert!(parse_listeners("listeners", "").is_err());
    }

    #[test]
    fn topic_resolve_precedence() {
        let b = load(
            None,
            &["log.segment.bytes=1000".into(), "log.roll.hours=2".into()],
        )
        .unwrap();
        let t = resolve(
            &b,
            &ov(&[("retention.ms", "5000"), ("flush.policy", "replication")]),
        )
        .unwrap();
        assert_eq!(t.segment_bytes, 1000);
        assert_eq!(t.segment_ms, 7_200_000);
        assert_eq!(t.retention_ms, 5000);
        assert_eq!(t.flush_policy, FlushPolicy::Replication);
        assert_eq!(t.flush_ms, i64::MAX as u64);
        assert_eq!(t.max_message_bytes, 1048588);
        assert_eq!(t.cleanup_policy, vec!["delete".to_string()]);
        assert_eq!(t.min_insync_replicas, 1);

        let d = describe_topic(&b, &ov(&[("retention.ms", "5000")]));
        assert_eq!(d.len(), TOPIC_KEYS.len());
        let e = |n: &str| d.iter().find(|e| e.name == n).unwrap().clone();
        assert_eq!(e("retention.ms").source, ConfigSource::DynamicTopic);
        assert_eq!(e("segment.bytes").source, ConfigSource::StaticBroker);
        assert_eq!(e("segment.bytes").value.as_deref(), Some("1000"));
        assert_eq!(e("segment.ms").source, ConfigSource::StaticBroker);
        assert_eq!(e("retention.bytes").source, ConfigSource::Default);
        assert_eq!(e("segment.bytes").config_type, ConfigType::Int);
        assert_eq!(e("retention.ms").value.as_deref(), Some("5000"));
    }

    #[test]
    fn topic_defaults_match_kafka() {
        // With a default broker, every topic value equals the table's Kafka default.
        let b = BrokerConfig::default();
        for e in describe_topic(&b, &BTreeMap::new()) {
            let s = find(TOPIC_KEYS, &e.name).unwrap();
            assert_eq!(e.value.as_deref(), s.default, "{}", e.name);
            assert_eq!(e.source, ConfigSource::Default);
        }
        resolve(&b, &BTreeMap::new()).unwrap();
    }

    #[test]
    fn topic_validation() {
        assert!(validate_topic_overrides(&ov(&[
            ("segment.bytes", "100"),
            ("cleanup.policy", "compact,delete")
        ]))
        .is_ok());
        let e = validate_topic_overrides(&ov(&[("bogus", "1")])).unwrap_err();
        assert!(matches!(e, ConfigError::UnknownKey { .. }));
        assert!(validate_topic_overrides(&ov(&[("segment.bytes", "1")])).is_err());
        assert!(validate_topic_overrides(&ov(&[("compression.type", "brotli")])).is_err());
        assert!(validate_topic_overrides(&ov(&[("cleanup.policy", "")])).is_err());
        assert!(validate_topic_overrides(&ov(&[("max.message.bytes", "99999999999")])).is_err());
        assert!(resolve(
            &BrokerConfig::default(),
            &ov(&[("min.insync.replicas", "0")])
        )
        .is_err());
    }

    #[test]
    fn describe_broker_sources() {
        let b = load(None, &["num.partitions=3".into()]).unwrap();
        let d = describe_broker(&b);
        assert_eq!(d.len(), BROKER_KEYS.len());
        let np = d.iter().find(|e| e.name == "num.partitions").unwrap();
        assert_eq!(
            (np.value.as_deref(), np.source, np.read_only),
            (Some("3"), ConfigSource::StaticBroker, true)
        );
        let l = d.iter().find(|e| e.name == "listeners").unwrap();
        assert_eq!(l.source, ConfigSource::Default);
        assert_eq!(l.value.as_deref(), Some("PLAINTEXT://127.0.0.1:9092"));
    }
}

// ---------------------------------------------------------------------------------------------
// Conversion to the shard crate's LogConfig (checked against shard/src/config.rs; if its field
// names shift, this is the one place to fix).
impl TopicConfig {
    pub fn to_log_config(&self) -> shard::LogConfig {
        shard::LogConfig {
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms,
            index_interval_bytes: self.index_interval_bytes,
            segment_index_bytes: self.segment_index_bytes,
            max_message_bytes: self.max_message_bytes,
            flush_policy: match self.flush_policy {
                FlushPolicy::Ack => shard::FlushPolicy::Ack,
                FlushPolicy::Replication => shard::FlushPolicy::Replication,
            },
            flush_messages: self.flush_messages,
            flush_ms: self.flush_ms,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            cleanup_delete: self.cleanup_policy.iter().any(|p| p == "delete"),
            producer_id_expiration_ms: self.producer_id_expiration_ms,
        }
    }
}

#[cfg(test)]
mod log_config_tests {
    use super::*;

    #[test]
    fn default_topic_matches_shard_defaults() {
        let lc = resolve(&BrokerConfig::default(), &BTreeMap::new())
            .unwrap()
            .to_log_config();
        let d = shard::LogConfig::default();
        assert_eq!(
            (
                lc.segment_bytes,
                lc.segment_ms,
                lc.index_interval_bytes,
                lc.segment_index_bytes
            ),
            (
                d.segment_bytes,
                d.segment_ms,
                d.index_interval_bytes,
                d.segment_index_bytes
            )
        );
        assert_eq!(
            (
                lc.max_message_bytes,
                lc.flush_messages,
                lc.flush_ms,
                lc.retention_ms,
                lc.retention_bytes
            ),
            (
                d.max_message_bytes,
                d.flush_messages,
                d.flush_ms,
                d.retention_ms,
                d.retention_bytes
            )
        );
        assert_eq!(lc.flush_policy, d.flush_policy);
    }
}
