//! Identifiers and small enums that more than one crate names: one definition each, here at
//! the bottom of the crate graph, so that the config, the logs, the metadata image and the
//! coordinators agree on them without converting.

/// A topic's id (Kafka's `Uuid`, 16 bytes; all zeroes is "none").
pub type TopicId = [u8; 16];

/// When a log's bytes are made durable (fdatasync): our key `log.flush.policy` / topic
/// `flush.policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// fdatasync before an acks=all produce is answered (group commit). The single-node
    /// default: with no replicas, the page cache alone is not a copy worth acking.
    #[default]
    Ack,
    /// Kafka's behaviour: never fsync on the produce path; durability comes from replication.
    /// Only `flush.messages` / `flush.ms` (and clean shutdown) sync.
    Replication,
}

impl FlushPolicy {
    /// The policy named `s` (case-insensitive), as the config keys spell it.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ack" => Some(FlushPolicy::Ack),
            "replication" => Some(FlushPolicy::Replication),
            _ => None,
        }
    }
}
