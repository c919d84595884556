//! The native producer's settings, read from Kafka's property names (librdkafka aliases
//! accepted).

use std::time::Duration;

use wire::record_batch::Compression;

use crate::native::PropView;

/// Producer settings, from Kafka property names (librdkafka aliases accepted).
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    pub client_id: String,
    pub batch_size: usize,
    pub linger: Duration,
    pub max_in_flight: usize,
    pub acks: i16,
    pub compression: Compression,
    pub request_timeout: Duration,
    pub delivery_timeout: Duration,
    pub retry_backoff: Duration,
    pub max_block: Duration,
    pub max_messages: usize,
    pub max_bytes: usize,
    pub max_request_size: usize,
}

pub fn parse_compression(name: &str) -> anyhow::Result<Compression> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "" | "none" | "uncompressed" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => anyhow::bail!("unknown compression.type {other:?}"),
    })
}

impl ProducerConfig {
    pub fn from_props(props: &[(String, String)]) -> anyhow::Result<ProducerConfig> {
        let p = PropView(props);
        if crate::native::tls::client_config(props)?.is_some() {
            anyhow::bail!("the native producer speaks PLAINTEXT only (security.protocol=SSL is for the native consumer)");
        }
        let acks = match p
            .string(&["acks", "request.required.acks"], "all")
            .to_ascii_lowercase()
            .as_str()
        {
            "all" | "-1" => -1,
            "1" => 1,
            "0" => 0,
            other => anyhow::bail!("unsupported acks={other}"),
        };
        let ms = |names: &[&str], d: u64| -> anyhow::Result<Duration> {
            Ok(Duration::from_millis(p.num(names, d)?))
        };
        Ok(ProducerConfig {
            client_id: p.string(&["client.id"], "bench-native"),
            batch_size: p.num::<usize>(&["batch.size"], 16384)?.max(128),
            linger: Duration::from_secs_f64(
                p.num::<f64>(&["linger.ms", "queue.buffering.max.ms"], 5.0)?
                    .max(0.0)
                    / 1000.0,
            ),
            max_in_flight: p
                .num::<usize>(
                    &["max.in.flight.requests.per.connection", "max.in.flight"],
                    5,
                )?
                .max(1),
            acks,
            compression: parse_compression(
                &p.string(&["compression.type", "compression.codec"], "none"),
            )?,
            request_timeout: ms(&["request.timeout.ms"], 30_000)?,
            delivery_timeout: ms(&["delivery.timeout.ms", "message.timeout.ms"], 120_000)?,
            retry_backoff: ms(&["retry.backoff.ms"], 100)?,
            max_block: ms(&["max.block.ms"], 60_000)?,
            max_messages: p
                .num::<usize>(&["queue.buffering.max.messages"], 100_000)?
                .max(1),
            max_bytes: match p.get(&["buffer.memory"]) {
                Some(_) => p.num::<usize>(&["buffer.memory"], 0)?,
                None => p.num::<usize>(&["queue.buffering.max.kbytes"], 1 << 20)? * 1024,
            }
            .max(1024),
            max_request_size: p
                .num::<usize>(&["max.request.size", "message.max.bytes"], 1 << 20)?
                .max(1024),
        })
    }
}
