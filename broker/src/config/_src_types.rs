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

