//! The librdkafka engine: `rdkafka`'s `BaseProducer`/`BaseConsumer`, polled on the caller's
//! thread so delivery callbacks run there (the contract in `engine/mod.rs`).
//!
//! Properties arrive in Kafka's (Java client's) names. librdkafka understands most of them
//! (acks, linger.ms, batch.size, compression.type, client.id, ...); the few Java-only ones are
//! translated or dropped by [`translate_props`], with a note on stderr.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _, DefaultConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::{ConsumedRecord, DeliveryCallback, DeliveryInfo, Props, SendError};

/// Java-client property names librdkafka doesn't know: `Some(name)` = librdkafka's name for
/// it (value in the same unit unless noted in `translate_props`), `None` = dropped.
fn java_only(key: &str) -> Option<Option<&'static str>> {
    Some(match key {
        "key.serializer" | "value.serializer" | "key.deserializer" | "value.deserializer" => None,
        "max.block.ms" | "metadata.max.idle.ms" | "partitioner.class" | "interceptor.classes" => {
            None
        }
        "buffer.memory" => Some("queue.buffering.max.kbytes"),
        "send.buffer.bytes" => Some("socket.send.buffer.bytes"),
        "receive.buffer.bytes" => Some("socket.receive.buffer.bytes"),
        "max.poll.records" | "default.api.timeout.ms" | "exclude.internal.topics" => None,
        _ => return None,
    })
}

/// Applies Kafka-named `props` to a librdkafka config (translating Java-only names).
pub fn translate_props(props: &Props, config: &mut ClientConfig) {
    for (key, value) in props {
        match java_only(key) {
            None => {
                config.set(key, value);
            }
            Some(None) => eprintln!("note: librdkafka engine ignores Java-client property {key}"),
            Some(Some(name)) => {
                let value = if key == "buffer.memory" {
                    value
                        .parse::<u64>()
                        .map(|b| (b / 1024).max(1).to_string())
                        .unwrap_or_else(|_| value.clone())
                } else {
                    value.clone()
                };
                config.set(name, value);
            }
        }
    }
}

fn base_config(bootstrap: &str, props: &Props) -> ClientConfig {
    let mut config = ClientConfig::new();
    translate_props(props, &mut config);
    config.set("bootstrap.servers", bootstrap);
    config.set_log_level(RDKafkaLogLevel::Warning);
    config
}

/// Context that forwards each delivery report to the record's own boxed callback and sends
/// librdkafka's warnings/errors to stderr.
pub struct Ctx;

/// The per-record delivery opaque. `Mutex` makes it `Sync`, which rdkafka requires of a
/// boxed opaque; it is only ever locked once, by the delivery report.
pub struct CallbackHolder(Mutex<Option<DeliveryCallback>>);

impl ClientContext for Ctx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            eprintln!("librdkafka: {fac} {log_message}");
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka error: {error}: {reason}");
    }
}

impl ProducerContext for Ctx {
    type DeliveryOpaque = Box<CallbackHolder>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::DeliveryOpaque) {
        let callback = opaque.0.into_inner().unwrap_or_else(|e| e.into_inner());
        let Some(callback) = callback else { return };
        match result {
            Ok(m) => callback(Ok(DeliveryInfo {
                partition: m.partition(),
                offset: m.offset(),
            })),
            Err((e, _)) => callback(Err(e.to_string())),
        }
    }
}

pub struct RdProducer {
    inner: BaseProducer<Ctx>,
}

pub fn producer(bootstrap: &str, props: &Props) -> anyhow::Result<Box<dyn super::Producer>> {
    let config = base_config(bootstrap, props);
    let inner: BaseProducer<Ctx> = config
        .create_with_context(Ctx)
        .context("creating the librdkafka producer")?;
    Ok(Box::new(RdProducer { inner }))
}

impl super::Producer for RdProducer {
    fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp_ms: i64,
        on_delivery: DeliveryCallback,
    ) -> Result<(), SendError> {
        let opaque = Box::new(CallbackHolder(Mutex::new(Some(on_delivery))));
        let mut record: BaseRecord<'_, [u8], [u8], Box<CallbackHolder>> =
            BaseRecord::with_opaque_to(topic, opaque)
                .payload(value)
                .timestamp(timestamp_ms);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        match self.inner.send(record) {
            Ok(()) => Ok(()),
            // The returned record (and its callback) is dropped: the caller retries afresh.
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                Err(SendError::QueueFull)
            }
            Err((e, _)) => Err(SendError::Other(e.to_string())),
        }
    }

    fn poll(&mut self, timeout: Duration) {
        self.inner.poll(timeout);
    }

    fn flush(&mut self, timeout: Duration) -> Result<(), String> {
        self.inner.flush(timeout).map_err(|e| e.to_string())
    }
}

pub struct RdConsumer {
    inner: BaseConsumer<DefaultConsumerContext>,
}

pub fn consumer(bootstrap: &str, props: &Props) -> anyhow::Result<Box<dyn super::Consumer>> {
    let mut config = ClientConfig::new();
    // A group id is required by librdkafka's consumer, but we never subscribe or commit.
    config.set("group.id", format!("bench-perf-{}", std::process::id()));
    config.set("enable.auto.commit", "false");
    config.set("enable.auto.offset.store", "false");
    config.set("enable.partition.eof", "false");
    translate_props(props, &mut config);
    config.set("bootstrap.servers", bootstrap);
    config.set_log_level(RDKafkaLogLevel::Warning);
    let inner: BaseConsumer<DefaultConsumerContext> = config
        .create()
        .context("creating the librdkafka consumer")?;
    Ok(Box::new(RdConsumer { inner }))
}

/// Records drained per `poll_into` call after the first (bounds the time spent in one call).
const MAX_DRAIN: usize = 10_000;

impl super::Consumer for RdConsumer {
    fn assign_all(&mut self, topic: &str) -> Result<Vec<i32>, String> {
        let metadata = self
            .inner
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| format!("metadata for {topic}: {e}"))?;
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Err(format!("topic {topic} not in metadata"));
        };
        if let Some(err) = t.error() {
            return Err(format!("topic {topic}: {:?}", RDKafkaErrorCode::from(err)));
        }
        let mut partitions: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
        partitions.sort_unstable();
        if partitions.is_empty() {
            return Err(format!("topic {topic} has no partitions"));
        }
        let mut tpl = TopicPartitionList::new();
        for &p in &partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
        self.inner
            .assign(&tpl)
            .map_err(|e| format!("assign {topic}: {e}"))?;
        Ok(partitions)
    }

    fn poll_into(
        &mut self,
        out: &mut Vec<ConsumedRecord>,
        timeout: Duration,
    ) -> Result<(), String> {
        let mut wait = timeout;
        for _ in 0..MAX_DRAIN {
            match self.inner.poll(wait) {
                None => break,
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(m)) => {
                    let value = m.payload().unwrap_or(&[]);
                    out.push(ConsumedRecord {
                        partition: m.partition(),
                        offset: m.offset(),
                        timestamp_ms: m.timestamp().to_millis().unwrap_or(-1),
                        key_len: m.key().map_or(0, <[u8]>::len),
                        value_len: value.len(),
                        value_prefix: ConsumedRecord::prefix_of(value),
                    });
                }
            }
            wait = Duration::ZERO;
        }
        Ok(())
    }
}

/// Creates `topic` via librdkafka's admin client (replication factor 1); TOPIC_ALREADY_EXISTS
/// is not an error.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    config.set_log_level(RDKafkaLogLevel::Warning);
    let admin: AdminClient<DefaultClientContext> =
        config.create().context("creating the admin client")?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new()
        .request_timeout(Some(Duration::from_secs(30)))
        .operation_timeout(Some(Duration::from_secs(30)));
    let results = futures::executor::block_on(admin.create_topics([&new_topic], &opts))
        .with_context(|| format!("creating topic {topic}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => anyhow::bail!("creating topic {name}: {code}"),
        }
    }
    Ok(())
}
