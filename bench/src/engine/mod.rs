//! Client engines the perf tools drive: librdkafka (through `rdkafka`) or the native Rust
//! client (`crate::native`, wrapped in [`native`]).
//!
//! The contract below is shared by both engines; the perf tools only see `dyn Producer` /
//! `dyn Consumer`. Delivery callbacks run on the thread that calls `poll`/`flush`.

pub mod librdkafka;
pub mod native;

use std::time::Duration;

/// Which client library drives the benchmark (`--client librdkafka|native`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    #[default]
    Librdkafka,
    Native,
}

impl ClientKind {
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Librdkafka => "librdkafka",
            ClientKind::Native => "native",
        }
    }
}

impl std::fmt::Display for ClientKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs once per record, with the partition/offset it was written at, or the error.
pub type DeliveryCallback = Box<dyn FnOnce(Result<DeliveryInfo, String>) + Send>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryInfo {
    pub partition: i32,
    pub offset: i64,
}

pub trait Producer {
    /// Queues one record for `topic` (partition None = the engine picks: round-robin per batch
    /// or by key hash); `on_delivery` runs (on the calling thread, inside poll/flush) when
    /// acknowledged or failed. Returns Err(QueueFull) when the engine's buffer is full: the
    /// caller polls and retries.
    fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp_ms: i64,
        on_delivery: DeliveryCallback,
    ) -> Result<(), SendError>;
    /// Runs delivery callbacks that are ready, waiting up to `timeout` for at least one.
    fn poll(&mut self, timeout: Duration);
    /// Sends everything queued and waits for every delivery callback.
    fn flush(&mut self, timeout: Duration) -> Result<(), String>;
}

#[derive(Debug)]
pub enum SendError {
    QueueFull,
    Other(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::QueueFull => f.write_str("producer queue full"),
            SendError::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SendError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key_len: usize,
    pub value_len: usize,
    /// First bytes of the value, zero-padded (e2e latency embeds the send time here).
    pub value_prefix: [u8; 16],
}

impl ConsumedRecord {
    /// Copies up to 16 leading bytes of `value` into a zero-padded prefix.
    pub fn prefix_of(value: &[u8]) -> [u8; 16] {
        let mut prefix = [0u8; 16];
        let n = value.len().min(16);
        prefix[..n].copy_from_slice(&value[..n]);
        prefix
    }
}

pub trait Consumer {
    /// Assigns every partition of `topic` (no consumer group), starting from the earliest offset.
    fn assign_all(&mut self, topic: &str) -> Result<Vec<i32>, String>;
    /// Appends records that arrived (waiting up to `timeout` for some) to `out`.
    fn poll_into(&mut self, out: &mut Vec<ConsumedRecord>, timeout: Duration)
        -> Result<(), String>;
}

/// Producer/consumer properties in Kafka's names (acks, linger.ms, batch.size,
/// compression.type, client.id, ...), from --producer-props / --producer.config /
/// --consumer.config.
pub type Props = Vec<(String, String)>;

/// Creates a producer of `kind` connected to `bootstrap` (which wins over any
/// `bootstrap.servers` in `props`).
pub fn producer(
    kind: ClientKind,
    bootstrap: &str,
    props: &Props,
) -> anyhow::Result<Box<dyn Producer>> {
    match kind {
        ClientKind::Librdkafka => librdkafka::producer(bootstrap, props),
        ClientKind::Native => native::producer(bootstrap, props),
    }
}

/// Creates a consumer of `kind` connected to `bootstrap`; call `assign_all` before polling.
pub fn consumer(
    kind: ClientKind,
    bootstrap: &str,
    props: &Props,
) -> anyhow::Result<Box<dyn Consumer>> {
    match kind {
        ClientKind::Librdkafka => librdkafka::consumer(bootstrap, props),
        ClientKind::Native => native::consumer(bootstrap, props),
    }
}

/// Creates `topic` with `partitions` partitions (replication factor 1) via librdkafka's admin
/// client; an existing topic is not an error.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    librdkafka::create_topic(bootstrap, topic, partitions)
}

/// Reads a Java-style `.properties` file (`key=value` or `key: value`, `#`/`!` comments).
pub fn read_props_file(path: &std::path::Path) -> anyhow::Result<Props> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_props(&text))
}

/// Parses Java `.properties` text (the simple subset: one `key=value`/`key: value` a line).
pub fn parse_props(text: &str) -> Props {
    let mut props = Props::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line.find(['=', ':']);
        let (k, v) = match split {
            Some(i) => (line[..i].trim(), line[i + 1..].trim()),
            None => (line, ""),
        };
        set_prop(&mut props, k, v);
    }
    props
}

/// Parses `k=v` command-line properties (Kafka rejects anything but exactly one `=`).
pub fn parse_kv_props(items: &[String]) -> anyhow::Result<Props> {
    let mut props = Props::new();
    for item in items {
        let pieces: Vec<&str> = item.split('=').collect();
        if pieces.len() != 2 {
            anyhow::bail!("Invalid property: {item}");
        }
        set_prop(&mut props, pieces[0], pieces[1]);
    }
    Ok(props)
}

/// Sets `key` to `value`, replacing an earlier value (later sources win, as in Kafka).
pub fn set_prop(props: &mut Props, key: &str, value: &str) {
    if let Some(slot) = props.iter_mut().find(|(k, _)| k == key) {
        slot.1 = value.to_string();
    } else {
        props.push((key.to_string(), value.to_string()));
    }
}

pub fn get_prop<'a>(props: &'a Props, key: &str) -> Option<&'a str> {
    props
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
