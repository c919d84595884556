//! Per-log configuration (`LogConfig`): the subset of Kafka's topic configs that the log itself
//! enforces. Owns only the values and their defaults (Kafka's); parsing of topic configs from
//! CreateTopics / AlterConfigs belongs to the broker.

pub use wire::FlushPolicy;

/// Settings of one partition log. Defaults are Kafka's.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this (1 GiB).
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this (7 days).
    pub segment_ms: u64,
    /// `index.interval.bytes`: one offset/time index entry per this many log bytes (4096).
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: preallocated size of each index file of the active segment
    /// (10 MiB); a full index rolls the segment.
    pub segment_index_bytes: u32,
    /// `max.message.bytes`: the largest record batch accepted (1048588).
    pub max_message_bytes: u32,
    pub flush_policy: FlushPolicy,
    /// `flush.messages`: sync after this many messages (i64::MAX as u64 = never).
    pub flush_messages: u64,
    /// `flush.ms`: sync when the oldest unsynced append is older than this (never).
    pub flush_ms: u64,
    /// `preallocate`: the active segment reserves space ahead of its appends (fallocate, as
    /// much again as it holds, `PREALLOCATE_MIN_BYTES`..`PREALLOCATE_MAX_BYTES`); false: the
    /// file ends at its last batch.
    pub preallocate: bool,
    /// `retention.ms` (-1 = unlimited). Enforced by `PartitionLog::apply_retention`.
    pub retention_ms: i64,
    /// `retention.bytes` (-1 = unlimited). Enforced by `PartitionLog::apply_retention`.
    pub retention_bytes: i64,
    /// `cleanup.policy` contains `delete` (Kafka's `LogConfig.delete`): only then do
    /// `retention.ms` / `retention.bytes` delete segments. A `compact`-only topic keeps every
    /// segment; the log cleaner compacts it instead (see `cleanup_compact`).
    pub cleanup_delete: bool,
    /// `producer.id.expiration.ms`: an idempotent producer with no batch for this long is
    /// forgotten (Kafka's default, one day).
    pub producer_id_expiration_ms: i64,
    /// `cleanup.policy` contains `compact`: the shard's log cleaner keeps the latest record of
    /// every key (see `log::cleaner`).
    pub cleanup_compact: bool,
    /// `min.cleanable.dirty.ratio` (0.5): dirty bytes / (clean + dirty) before a pass.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms` (0): a segment whose largest timestamp is younger stays dirty.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms` (never): a dirty record older than this forces a pass.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms` (1 day): how long a tombstone outlives the pass that first saw it.
    pub delete_retention_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            max_message_bytes: 1_048_588,
            flush_policy: FlushPolicy::Ack,
            flush_messages: i64::MAX as u64,
            flush_ms: i64::MAX as u64,
            preallocate: true,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            cleanup_delete: true,
            producer_id_expiration_ms: 86_400_000,
            cleanup_compact: false,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

impl LogConfig {
    /// Segment positions are u32 in the offset index (as in Kafka, where they are Java ints),
    /// so a segment can never be allowed to pass 2 GiB - 1 whatever the config says.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }
}
