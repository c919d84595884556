//! `broker produce --bootstrap-server HOST:PORT --topic T`: what Kafka's
//! `kafka-console-producer.sh` does. Each line of stdin is one record (with `--property
//! parse.key=true` a key, the key separator, then the value); records are gathered into one
//! record batch per partition and sent to each partition's leader in one Produce request.
//!
//! A batch is sent when it reaches `--batch-size` bytes, when the pending records of all
//! partitions reach [`MAX_PENDING_BYTES`], and whenever stdin has nothing more buffered, so that
//! lines typed at a terminal go out at once while a piped file fills whole batches. Keys are
//! partitioned as Kafka's Java producer does (murmur2), so a key lands where a Java client
//! would put it; records without a key stick to one partition per batch, then move on.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::produce_request::{PartitionProduceData, TopicProduceData};
use wire::generated::{ProduceRequest, ProduceResponse};
use wire::record_batch::{BatchBuilder, Compression};
use wire::ErrorCode;

use super::progress::RecordProgress;
use super::routing::{kafka_error, Cluster, REQUEST_TIMEOUT_MS};
use super::CommonProgressArgs;

/// The largest record (key plus value) accepted: Kafka's producer `max.request.size` default.
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// Pending bytes across all partitions that force a send: one Produce request's worth
/// (`max.request.size`), so memory stays bounded however many partitions keys spread over.
const MAX_PENDING_BYTES: usize = 1 << 20;
/// Bytes of stdin read at a time: large enough that a piped file fills whole batches before
/// the buffer runs dry (which sends what is pending).
const STDIN_BUFFER_BYTES: usize = 1 << 20;
/// Produce v3 is the first to carry v2 record batches; v12 and later name topics by id.
const PRODUCE_MIN_VERSION: i16 = 3;
const PRODUCE_MAX_VERSION: i16 = 11;
/// Sends of one batch before a retriable error is reported: enough to ride out a leader
/// moving or a just-created partition, few enough to fail within a second or so.
const MAX_PRODUCE_ATTEMPTS: u32 = 5;
/// Wait before a retry (Kafka's `retry.backoff.ms` default).
const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);
/// Kafka's LEADER_NOT_AVAILABLE, for a partition Metadata names no leader for.
const LEADER_NOT_AVAILABLE: i16 = 5;

/// How each line becomes a record (`--property` of kafka-console-producer.sh's LineMessageReader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineFormat {
    pub parse_key: bool,
    pub key_separator: String,
    /// A key or value equal to this is sent as null.
    pub null_marker: Option<String>,
    /// With `parse.key`, a line without the separator becomes a value with no key instead of
    /// an error.
    pub ignore_error: bool,
}

impl Default for LineFormat {
    fn default() -> Self {
        LineFormat {
            parse_key: false,
            key_separator: "\t".to_owned(),
            null_marker: None,
            ignore_error: false,
        }
    }
}

/// Parses `--property key=value` settings into a line format.
pub fn line_format(properties: &[String]) -> anyhow::Result<LineFormat> {
    let mut format = LineFormat::default();
    for p in properties {
        let Some((k, v)) = p.split_once('=') else {
            bail!("--property expects key=value, got {p:?}");
        };
        match k {
            "parse.key" => format.parse_key = parse_bool(k, v)?,
            "key.separator" => format.key_separator = v.to_owned(),
            "null.marker" => format.null_marker = Some(v.to_owned()),
            "ignore.error" => format.ignore_error = parse_bool(k, v)?,
            _ => bail!(
                "unknown property {k:?} (known: parse.key, key.separator, null.marker, ignore.error)"
            ),
        }
    }
    if format.key_separator.is_empty() {
        bail!("key.separator must not be empty");
    }
    Ok(format)
}

pub(crate) fn parse_bool(key: &str, value: &str) -> anyhow::Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => bail!("{key} expects true or false, got {value:?}"),
    }
}

/// A line's key and value.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Splits one line (without its line end) into key and value as Kafka's LineMessageReader
/// does; `number` (from 1) names the line in errors.
pub fn parse_line<'a>(
    format: &LineFormat,
    line: &'a [u8],
    number: u64,
) -> anyhow::Result<KeyValue<'a>> {
    let nullable = |b: &'a [u8]| -> Option<&'a [u8]> {
        match &format.null_marker {
            Some(marker) if marker.as_bytes() == b => None,
            _ => Some(b),
        }
    };
    if !format.parse_key {
        return Ok((None, nullable(line)));
    }
    let sep = format.key_separator.as_bytes();
    match line.windows(sep.len()).position(|w| w == sep) {
        Some(at) => Ok((nullable(&line[..at]), nullable(&line[at + sep.len()..]))),
        None if format.ignore_error => Ok((None, nullable(line))),
        None => bail!(
            "No key separator found on line number {number}: '{}'",
            String::from_utf8_lossy(line)
        ),
    }
}

/// Kafka's `Utils.murmur2`, which its default partitioner hashes keys with.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for `key` among `count` partitions.
pub fn key_partition(key: &[u8], count: usize) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) as usize % count.max(1)) as i32
}

/// Kafka's `--request-required-acks` values.
pub fn parse_acks(value: &str) -> Result<i16, String> {
    match value {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        _ => Err(format!("expected all, -1, 0 or 1, got {value:?}")),
    }
}

/// Kafka's `--compression-codec` names.
pub fn parse_codec(value: &str) -> Result<Compression, String> {
    match value {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        _ => Err(format!(
            "expected none, gzip, snappy, lz4 or zstd, got {value:?}"
        )),
    }
}

/// `broker produce`, with kafka-console-producer.sh's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: CommonProgressArgs,
    #[arg(long)]
    pub topic: String,
    /// Line parsing: parse.key=true, key.separator=SEP (default tab), null.marker=M,
    /// ignore.error=true; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Send every record to this partition (default: by key, as Kafka's partitioner).
    #[arg(long)]
    pub partition: Option<i32>,
    /// all (-1), 1 or 0 (no answer is awaited).
    #[arg(long, default_value = "-1", value_parser = parse_acks, allow_negative_numbers = true)]
    pub request_required_acks: i16,
    /// none, gzip, snappy, lz4 or zstd (gzip when given without a value).
    #[arg(long, num_args = 0..=1, default_value = "none", default_missing_value = "gzip",
          value_parser = parse_codec)]
    pub compression_codec: Compression,
    /// Bytes of records gathered per partition before a batch is sent (Kafka's batch.size).
    #[arg(long, default_value_t = 16384)]
    pub batch_size: usize,
}

/// One partition's records waiting to be sent, and what was acknowledged so far.
#[derive(Debug, Default)]
struct PartitionState {
    pending: Option<BatchBuilder>,
    pending_bytes: usize,
    pending_records: u64,
    acked_records: u64,
    first_offset: Option<i64>,
    last_offset: Option<i64>,
}

/// What a produce run sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub records: u64,
    pub bytes: u64,
    pub requests: u64,
}

struct Producer {
    cluster: Cluster,
    topic: String,
    /// Partition to leader.
    leaders: Vec<(i32, i32)>,
    acks: i16,
    codec: Compression,
    version: BTreeMap<i32, i16>,
    parts: BTreeMap<i32, PartitionState>,
    pending_bytes: usize,
    totals: Totals,
}

impl Producer {
    fn add(&mut self, partition: i32, key: Option<&[u8]>, value: Option<&[u8]>, now_ms: i64) {
        let size = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        let state = self.parts.entry(partition).or_default();
        let builder = state
            .pending
            .take()
            .unwrap_or_else(|| BatchBuilder::new(self.codec));
        state.pending = Some(builder.push(key, value, &[], now_ms));
        state.pending_bytes += size;
        state.pending_records += 1;
        self.pending_bytes += size;
        self.totals.records += 1;
        self.totals.bytes += size as u64;
    }

    /// Sends every pending batch: one Produce request per leader. Batches refused with a
    /// retriable error (a leader moved, a partition not ready yet) are sent again to the
    /// leader a fresh Metadata names, as Kafka's producer retries.
    fn flush(&mut self) -> anyhow::Result<()> {
        let mut batches: Vec<Pending> = Vec::new();
        for (&partition, state) in self.parts.iter_mut() {
            let Some(builder) = state.pending.take() else {
                continue;
            };
            let records = std::mem::take(&mut state.pending_records);
            state.pending_bytes = 0;
            batches.push(Pending {
                partition,
                batch: builder.build(),
                records,
            });
        }
        self.pending_bytes = 0;
        let mut attempt = 1;
        loop {
            let refused = self.send(batches)?;
            let Some(first) = refused.first() else {
                return Ok(());
            };
            if attempt >= MAX_PRODUCE_ATTEMPTS {
                let (p, code, message) = (first.0.partition, first.1, first.2.clone());
                return Err(
                    kafka_error(format!("{}-{p}", self.topic), code, message.as_deref()).into(),
                );
            }
            attempt += 1;
            std::thread::sleep(RETRY_BACKOFF);
            self.leaders = self.cluster.partitions(&self.topic)?;
            if self.leaders.is_empty() {
                bail!("topic {} has no partitions", self.topic);
            }
            batches = refused.into_iter().map(|(b, _, _)| b).collect();
        }
    }

    /// Sends `batches` to their leaders; returns those refused with a retriable error.
    fn send(&mut self, batches: Vec<Pending>) -> anyhow::Result<Vec<Refused>> {
        let mut refused = Vec::new();
        let mut by_leader: BTreeMap<i32, Vec<Pending>> = BTreeMap::new();
        for b in batches {
            match self.leaders.iter().find(|(p, _)| *p == b.partition) {
                Some(&(_, leader)) if leader >= 0 => by_leader.entry(leader).or_default().push(b),
                _ => refused.push((b, LEADER_NOT_AVAILABLE, None)),
            }
        }
        for (leader, batches) in by_leader {
            let client = self.cluster.node(leader)?;
            let version = match self.version.get(&leader) {
                Some(&v) => v,
                None => {
                    let v = client.version(
                        ApiKey::Produce,
                        PRODUCE_MIN_VERSION,
                        PRODUCE_MAX_VERSION,
                    )?;
                    self.version.insert(leader, v);
                    v
                }
            };
            let request = ProduceRequest {
                transactional_id: None,
                acks: self.acks,
                timeout_ms: REQUEST_TIMEOUT_MS,
                topic_data: vec![TopicProduceData {
                    name: self.topic.clone(),
                    partition_data: batches
                        .iter()
                        .map(|b| PartitionProduceData {
                            index: b.partition,
                            // A reference count, not a copy: the batch stays for a retry.
                            records: Some(b.batch.clone()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            };
            self.totals.requests += 1;
            if self.acks == 0 {
                client.send(ApiKey::Produce, version, &request)?;
                for b in batches {
                    self.parts.entry(b.partition).or_default().acked_records += b.records;
                }
                continue;
            }
            let resp: ProduceResponse = client.request(ApiKey::Produce, version, &request)?;
            let mut answers: BTreeMap<i32, (i16, i64, Option<String>)> = BTreeMap::new();
            for t in resp.responses.into_iter().filter(|t| t.name == self.topic) {
                for p in t.partition_responses {
                    answers.insert(p.index, (p.error_code, p.base_offset, p.error_message));
                }
            }
            for b in batches {
                let Some((code, base_offset, message)) = answers.remove(&b.partition) else {
                    bail!(
                        "the Produce response does not answer {}-{}",
                        self.topic,
                        b.partition
                    );
                };
                if code != 0 {
                    if ErrorCode::from_code(code).is_some_and(ErrorCode::is_retriable) {
                        refused.push((b, code, message));
                        continue;
                    }
                    return Err(kafka_error(
                        format!("{}-{}", self.topic, b.partition),
                        code,
                        message.as_deref(),
                    )
                    .into());
                }
                let state = self.parts.entry(b.partition).or_default();
                state.first_offset.get_or_insert(base_offset);
                state.last_offset = Some(base_offset + b.records as i64 - 1);
                state.acked_records += b.records;
            }
        }
        Ok(refused)
    }
}

/// One partition's batch on its way.
struct Pending {
    partition: i32,
    batch: bytes::Bytes,
    records: u64,
}

/// A batch refused with a retriable error code (and the broker's message).
type Refused = (Pending, i16, Option<String>);

/// Produces the lines of stdin, printing to `out`.
pub fn run_stdin(args: &ProduceArgs, out: &mut dyn Write) -> anyhow::Result<Totals> {
    let mut input = std::io::BufReader::with_capacity(STDIN_BUFFER_BYTES, std::io::stdin().lock());
    let mut progress = RecordProgress::new("produced", args.common.progress);
    run(args, &mut input, out, &mut progress)
}

/// Reads lines from `input` and produces them; prints a summary to `out` with `--json`.
pub fn run<R: Read>(
    args: &ProduceArgs,
    input: &mut std::io::BufReader<R>,
    out: &mut dyn Write,
    progress: &mut RecordProgress,
) -> anyhow::Result<Totals> {
    let format = line_format(&args.properties)?;
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let mut cluster = Cluster::connect(args.common.bootstrap_server())?;
    let leaders = cluster.partitions(&args.topic)?;
    if leaders.is_empty() {
        bail!("topic {} has no partitions", args.topic);
    }
    if let Some(p) = args.partition {
        if !leaders.iter().any(|&(q, _)| q == p) {
            return Err(kafka_error(format!("{}-{p}", args.topic), 3, None).into());
        }
    }
    let mut producer = Producer {
        cluster,
        topic: args.topic.clone(),
        leaders,
        acks: args.request_required_acks,
        codec: args.compression_codec,
        version: BTreeMap::new(),
        parts: BTreeMap::new(),
        pending_bytes: 0,
        totals: Totals::default(),
    };
    // Records without a key go to one partition until its batch fills (Kafka's sticky
    // partitioner), then to the next.
    let mut sticky = 0usize;
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = input
            .by_ref()
            .take(MAX_RECORD_BYTES as u64 + 2)
            .read_until(b'\n', &mut line)
            .context("reading stdin")?;
        if read == 0 {
            break;
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.len() > MAX_RECORD_BYTES {
            bail!(
                "RECORD_TOO_LARGE: line {number} is longer than {MAX_RECORD_BYTES} bytes \
                 (max.request.size)"
            );
        }
        let (key, value) = parse_line(&format, &line, number)?;
        let size = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        if size > MAX_RECORD_BYTES {
            bail!(
                "RECORD_TOO_LARGE: the record on line {number} is {size} bytes, larger than \
                 {MAX_RECORD_BYTES} (max.request.size)"
            );
        }
        // Metadata refreshed by a retry may name more partitions, never fewer.
        let count = producer.leaders.len();
        let partition = match (args.partition, key) {
            (Some(p), _) => p,
            (None, Some(k)) => producer.leaders[key_partition(k, count) as usize].0,
            (None, None) => producer.leaders[sticky % count].0,
        };
        producer.add(partition, key, value, now_ms());
        let full = producer
            .parts
            .get(&partition)
            .is_some_and(|s| s.pending_bytes >= args.batch_size);
        if full && args.partition.is_none() && key.is_none() {
            sticky += 1;
        }
        // Nothing more buffered means the next read may block (a person typing): send now.
        if full || producer.pending_bytes >= MAX_PENDING_BYTES || input.buffer().is_empty() {
            producer.flush()?;
            progress.update(producer.totals.records, producer.totals.bytes);
        }
    }
    producer.flush()?;
    progress.finish(producer.totals.records, producer.totals.bytes);
    if args.common.json() {
        let partitions: Vec<_> = producer
            .parts
            .iter()
            .filter(|(_, s)| s.acked_records > 0)
            .map(|(p, s)| {
                json!({
                    "partition": p,
                    "records": s.acked_records,
                    "first_offset": s.first_offset,
                    "last_offset": s.last_offset,
                })
            })
            .collect();
        writeln!(
            out,
            "{}",
            json!({
                "topic": args.topic,
                "records": producer.totals.records,
                "bytes": producer.totals.bytes,
                "requests": producer.totals.requests,
                "acks": args.request_required_acks,
                "partitions": partitions,
            })
        )?;
    }
    Ok(producer.totals)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use crate::fake_broker;
    use wire::generated::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use wire::generated::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use wire::generated::{MetadataResponse, ProduceResponse};
    use wire::primitives::Encodable;

    /// A one-partition broker that answers Produce with `codes` in turn (the last repeats),
    /// counting the Produce requests.
    fn fake_broker(codes: Vec<i16>) -> (String, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let addr = fake_broker::spawn(move |request, body| {
            let version = request.version;
            match request.key {
                ApiKey::ApiVersions => fake_broker::api_versions(&[
                    (ApiKey::Produce, 3, 3),
                    (ApiKey::Metadata, 1, 1),
                    (ApiKey::ApiVersions, 0, 0),
                ])
                .encode(body, version),
                ApiKey::Metadata => MetadataResponse {
                    brokers: vec![MetadataResponseBroker {
                        node_id: 1,
                        host: "127.0.0.1".into(),
                        port: i32::from(request.port),
                        ..Default::default()
                    }],
                    topics: vec![MetadataResponseTopic {
                        name: Some("t".into()),
                        partitions: vec![MetadataResponsePartition {
                            partition_index: 0,
                            leader_id: 1,
                            replica_nodes: vec![1],
                            isr_nodes: vec![1],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }
                .encode(body, version),
                ApiKey::Produce => {
                    let n = counted.fetch_add(1, Ordering::SeqCst);
                    let code = codes[n.min(codes.len() - 1)];
                    ProduceResponse {
                        responses: vec![TopicProduceResponse {
                            name: "t".into(),
                            partition_responses: vec![PartitionProduceResponse {
                                index: 0,
                                error_code: code,
                                base_offset: if code == 0 { 42 } else { -1 },
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }
                    .encode(body, version)
                }
                _ => return false,
            }
            .unwrap();
            true
        });
        (addr, calls)
    }

    fn produce_to(addr: &str, input: &[u8]) -> anyhow::Result<(Totals, String)> {
        let args = ProduceArgs {
            common: CommonProgressArgs {
                common: super::super::CommonArgs {
                    bootstrap_server: addr.to_owned(),
                    json: true,
                },
                progress: false,
            },
            topic: "t".into(),
            properties: Vec::new(),
            partition: None,
            request_required_acks: -1,
            compression_codec: Compression::None,
            batch_size: 16384,
        };
        let mut out = Vec::new();
        let mut reader = std::io::BufReader::new(input);
        let totals = run(&args, &mut reader, &mut out, &mut RecordProgress::hidden())?;
        Ok((totals, String::from_utf8(out).unwrap()))
    }

    #[test]
    fn retriable_errors_are_retried_and_others_reported_by_name() {
        // NOT_LEADER_OR_FOLLOWER twice, then accepted.
        let (addr, calls) = fake_broker(vec![6, 6, 0]);
        let (totals, out) = produce_to(&addr, b"a\nb\n").unwrap();
        assert_eq!(totals.records, 2);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let summary: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(summary["partitions"][0]["first_offset"], 42);
        assert_eq!(summary["partitions"][0]["last_offset"], 43);
        // Always refused: reported by name after the bounded attempts.
        let (addr, calls) = fake_broker(vec![6]);
        let err = produce_to(&addr, b"a\n").unwrap_err().to_string();
        assert!(err.contains("NOT_LEADER_OR_FOLLOWER"), "{err}");
        assert_eq!(calls.load(Ordering::SeqCst), MAX_PRODUCE_ATTEMPTS as usize);
        // Not retriable (MESSAGE_TOO_LARGE): reported at once.
        let (addr, calls) = fake_broker(vec![10]);
        let err = produce_to(&addr, b"a\n").unwrap_err().to_string();
        assert!(err.contains("MESSAGE_TOO_LARGE"), "{err}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        // Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn lines_split_as_kafkas_line_reader() {
        let plain = LineFormat::default();
        assert_eq!(
            parse_line(&plain, b"a:b", 1).unwrap(),
            (None, Some(&b"a:b"[..]))
        );
        let keyed = line_format(&["parse.key=true".into(), "key.separator=:".into()]).unwrap();
        assert_eq!(
            parse_line(&keyed, b"k1:v:1", 1).unwrap(),
            (Some(&b"k1"[..]), Some(&b"v:1"[..]))
        );
        assert_eq!(
            parse_line(&keyed, b":v", 1).unwrap(),
            (Some(&b""[..]), Some(&b"v"[..]))
        );
        let err = parse_line(&keyed, b"novalue", 7).unwrap_err().to_string();
        assert_eq!(err, "No key separator found on line number 7: 'novalue'");
        let lenient = line_format(&[
            "parse.key=true".into(),
            "ignore.error=true".into(),
            "null.marker=NULL".into(),
            "key.separator=::".into(),
        ])
        .unwrap();
        assert_eq!(
            parse_line(&lenient, b"novalue", 1).unwrap(),
            (None, Some(&b"novalue"[..]))
        );
        assert_eq!(
            parse_line(&lenient, b"NULL::x", 1).unwrap(),
            (None, Some(&b"x"[..]))
        );
        assert_eq!(
            parse_line(&lenient, b"k::NULL", 1).unwrap(),
            (Some(&b"k"[..]), None)
        );
        assert!(line_format(&["parse.key=yes".into()]).is_err());
        assert!(line_format(&["no.such=1".into()]).is_err());
        assert!(line_format(&["key.separator=".into()]).is_err());
    }

    #[test]
    fn acks_and_codecs_parse_as_kafkas_flags() {
        assert_eq!(parse_acks("all"), Ok(-1));
        assert_eq!(parse_acks("-1"), Ok(-1));
        assert_eq!(parse_acks("0"), Ok(0));
        assert!(parse_acks("2").is_err());
        assert_eq!(parse_codec("zstd"), Ok(Compression::Zstd));
        assert!(parse_codec("brotli").is_err());
    }

    #[test]
    fn keys_partition_as_kafkas_default_partitioner() {
        // toPositive(murmur2) % n.
        assert_eq!(key_partition(b"21", 7), ((-973932308i32 & 0x7fff_ffff) % 7));
        for key in [&b"a"[..], b"abc", b"some-key"] {
            assert!((0..3).contains(&key_partition(key, 3)));
        }
    }
}
