//! A topic's typed config as the partition log enforces it: the one place that maps
//! `config::TopicConfig` (Kafka's keys) to `shard::LogConfig` (what a log knows).

use config::TopicConfig;
use shard::LogConfig;

/// The log's settings for a partition of a topic configured as `topic`.
pub fn log_config(topic: &TopicConfig) -> LogConfig {
    let compact = topic.cleanup_policy.compact;
    LogConfig {
        segment_bytes: topic.segment_bytes,
        // Kafka's `LogConfig.maxSegmentMs`: a compacted log also rolls by
        // max.compaction.lag.ms, or records in the active segment would outlive it.
        segment_ms: if compact {
            topic
                .segment_ms
                .min(topic.max_compaction_lag_ms.max(1) as u64)
        } else {
            topic.segment_ms
        },
        index_interval_bytes: topic.index_interval_bytes,
        segment_index_bytes: topic.segment_index_bytes,
        max_message_bytes: topic.max_message_bytes,
        flush_policy: topic.flush_policy,
        flush_messages: topic.flush_messages,
        flush_ms: topic.flush_ms,
        preallocate: topic.preallocate,
        retention_ms: topic.retention_ms,
        retention_bytes: topic.retention_bytes,
        cleanup_delete: topic.cleanup_policy.delete,
        producer_id_expiration_ms: topic.producer_id_expiration_ms,
        cleanup_compact: compact,
        min_cleanable_dirty_ratio: topic.min_cleanable_dirty_ratio,
        min_compaction_lag_ms: topic.min_compaction_lag_ms,
        max_compaction_lag_ms: topic.max_compaction_lag_ms,
        delete_retention_ms: topic.delete_retention_ms,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use config::BrokerConfig;

    use super::*;

    #[test]
    fn default_topic_matches_shard_defaults() {
        let lc = log_config(&config::resolve(&BrokerConfig::default(), &BTreeMap::new()).unwrap());
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

    #[test]
    fn cleanup_policy_reaches_the_log() {
        let overrides = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        let compact_only = config::resolve(&BrokerConfig::default(), &overrides).unwrap();
        let log = log_config(&compact_only);
        assert!(log.cleanup_compact && !log.cleanup_delete);
    }
}
