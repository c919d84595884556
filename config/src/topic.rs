//! The typed configuration of one topic: its overrides (CreateTopics, AlterConfigs), else the
//! broker's synonym key, else Kafka's default, parsed once when a partition opens or the
//! topic's overrides change, never per request.

use std::collections::BTreeMap;

use super::broker::BrokerConfig;
use super::describe::ConfigSource;
use super::keys::{find, Spec, BROKER_KEYS, TOPIC_KEYS};
use super::properties::list_items;
use super::validate::check_value;
use super::ConfigError;

pub use wire::FlushPolicy;

/// `cleanup.policy`: `delete`, `compact`, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    fn parse(value: &str) -> CleanupPolicy {
        let has = |name: &str| {
            list_items(value)
                .iter()
                .any(|item| item.eq_ignore_ascii_case(name))
        };
        CleanupPolicy {
            delete: has("delete"),
            compact: has("compact"),
        }
    }

    /// The policy names in force (Kafka's list order).
    pub fn iter(&self) -> impl Iterator<Item = &'static str> {
        [(self.delete, "delete"), (self.compact, "compact")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
    }
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    fn parse(value: &str) -> TimestampType {
        if value.trim().eq_ignore_ascii_case("LogAppendTime") {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Lets code written against the former string field (`== "LogAppendTime"`) keep compiling.
impl PartialEq<&str> for TimestampType {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// `compression.type` of a topic: `producer` keeps what the producer sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompressionType {
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    fn parse(value: &str) -> CompressionType {
        match value.trim().to_ascii_lowercase().as_str() {
            "uncompressed" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => CompressionType::Producer,
        }
    }
}

/// Effective configuration of one topic (override > broker default > Kafka default).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    pub compression_type: CompressionType,
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
    /// `preallocate`: reserve disk space ahead of the active segment's appends.
    pub preallocate: bool,
    pub flush_policy: FlushPolicy,
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: CreateTime stamps further behind are refused.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: CreateTime stamps further ahead are refused.
    pub message_timestamp_after_max_ms: i64,
    pub min_insync_replicas: i32,
    pub producer_id_expiration_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub delete_retention_ms: i64,
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

/// The value in force of topic key `spec` and where it comes from: the override, else the
/// broker synonym (set explicitly: STATIC_BROKER_CONFIG; by its default: DEFAULT_CONFIG), else
/// Kafka's topic default.
pub(super) fn topic_value(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    spec: &'static Spec,
) -> (Option<String>, ConfigSource) {
    if let Some(v) = overrides.get(spec.name) {
        return (Some(v.trim().to_string()), ConfigSource::DynamicTopic);
    }
    match spec.broker_key.filter(|bk| find(BROKER_KEYS, bk).is_some()) {
        Some(bk) => {
            let source = broker.source_of(bk);
            (
                broker.effective(bk).or(spec.default.map(Into::into)),
                source,
            )
        }
        None => (spec.default.map(Into::into), ConfigSource::Default),
    }
}

/// Resolves a topic's effective config (override > broker default > Kafka default).
pub fn resolve(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<TopicConfig, ConfigError> {
    validate_topic_overrides(overrides)?;
    let vals: BTreeMap<&str, String> = TOPIC_KEYS
        .iter()
        .filter_map(|spec| {
            let (value, _) = topic_value(broker, overrides, spec);
            value.map(|v| (spec.name, v))
        })
        .collect();
    let n = |k: &str| vals.get(k).map(String::as_str).unwrap_or("");
    fn num<N: std::str::FromStr>(k: &str, v: &str) -> Result<N, ConfigError> {
        v.trim().parse().map_err(|_| ConfigError::InvalidValue {
            key: k.into(),
            value: v.into(),
            expected: "a non-negative number in range".into(),
        })
    }
    Ok(TopicConfig {
        cleanup_policy: CleanupPolicy::parse(n("cleanup.policy")),
        compression_type: CompressionType::parse(n("compression.type")),
        segment_bytes: num("segment.bytes", n("segment.bytes"))?,
        segment_ms: num("segment.ms", n("segment.ms"))?,
        segment_index_bytes: num("segment.index.bytes", n("segment.index.bytes"))?,
        index_interval_bytes: num("index.interval.bytes", n("index.interval.bytes"))?,
        max_message_bytes: num("max.message.bytes", n("max.message.bytes"))?,
        retention_ms: num::<i64>("retention.ms", n("retention.ms"))?.max(-1),
        retention_bytes: num("retention.bytes", n("retention.bytes"))?,
        flush_messages: num("flush.messages", n("flush.messages"))?,
        flush_ms: num("flush.ms", n("flush.ms"))?,
        preallocate: n("preallocate").trim().eq_ignore_ascii_case("true"),
        flush_policy: FlushPolicy::parse(n("flush.policy")).unwrap_or_default(),
        message_timestamp_type: TimestampType::parse(n("message.timestamp.type")),
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
        min_cleanable_dirty_ratio: num(
            "min.cleanable.dirty.ratio",
            n("min.cleanable.dirty.ratio"),
        )?,
        min_compaction_lag_ms: num("min.compaction.lag.ms", n("min.compaction.lag.ms"))?,
        max_compaction_lag_ms: num("max.compaction.lag.ms", n("max.compaction.lag.ms"))?,
        delete_retention_ms: num("delete.retention.ms", n("delete.retention.ms"))?,
    })
}

/// Names of all topic keys (e.g. for DescribeConfigs with a key filter).
pub fn topic_key_names() -> impl Iterator<Item = &'static str> {
    TOPIC_KEYS.iter().map(|s| s.name)
}
