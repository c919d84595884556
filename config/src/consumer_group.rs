//! Kafka's `group.consumer.*` settings (KIP-848 groups) and the broker-side assignors they
//! name. Only the values: the assignors' algorithms live with the coordinator.

/// The assignor names Kafka knows, in `group.consumer.assignors`' default order (the first is
/// the default).
pub const ASSIGNOR_NAMES: [&str; 2] = ["uniform", "range"];

/// A broker-side assignor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The assignor called `name` (Kafka also accepts the class names, which we do not serve).
    pub fn from_name(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }
}

/// Kafka's `group.consumer.*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms`: a member that does not heartbeat for this long is
    /// fenced.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: told to members in every response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`: members per group.
    pub max_size: u32,
    /// `group.consumer.assignors`: the assignors members may name; the first is the default.
    pub assignors: Vec<Assignor>,
}

impl ConsumerGroupConfig {
    pub const SESSION_TIMEOUT_MS_KEY: &'static str = "group.consumer.session.timeout.ms";
    pub const HEARTBEAT_INTERVAL_MS_KEY: &'static str = "group.consumer.heartbeat.interval.ms";
    pub const MAX_SIZE_KEY: &'static str = "group.consumer.max.size";
    pub const ASSIGNORS_KEY: &'static str = "group.consumer.assignors";

    pub fn default_assignor(&self) -> Assignor {
        self.assignors.first().copied().unwrap_or(Assignor::Uniform)
    }
}

impl Default for ConsumerGroupConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: i32::MAX as u32,
            assignors: vec![Assignor::Uniform, Assignor::Range],
        }
    }
}
