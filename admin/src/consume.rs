//! `broker consume --bootstrap-server HOST:PORT --topic T`: what Kafka's
//! `kafka-console-consumer.sh` prints. Without `--group`, every partition is read and the
//! start offsets come from ListOffsets (latest, or earliest with `--from-beginning`, or
//! `--partition N --offset X`); with `--group G` (or `--consumer-property group.id=G`) the
//! process is a member of classic consumer group G ([`super::consumer_group`]): it reads the
//! partitions the group assigns it, from the group's committed offsets (those without one as
//! above), and commits what it printed. Then each partition's leader is fetched from (sessionless Fetch, every partition it leads
//! in one request) until `--max-messages` records were printed or nothing arrived for
//! `--timeout-ms`. Compressed batches (gzip, snappy, lz4, zstd) are read with the `wire`
//! crate's bounded decompression; control batches (transaction markers) are skipped, as a
//! consumer does.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::fetch_request::{FetchPartition, FetchTopic};
use wire::generated::{FetchRequest, FetchResponse};
use wire::record_batch::{self, BatchHeader, Record, TimestampType};
use wire::ErrorCode;

use super::consumer_group::GroupMember;
use super::produce::parse_bool;
use super::progress::RecordProgress;
use super::routing::{kafka_error, Cluster, EARLIEST, LATEST};
use super::txn_filter::TxnFilter;
use super::CommonProgressArgs;

/// Fetch v4 is the first with isolation levels and v2 batches answered as is; v13 and later
/// name topics by id.
const FETCH_MIN_VERSION: i16 = 4;
const FETCH_MAX_VERSION: i16 = 12;
/// How long one Fetch may wait at the broker for data: short, so `--timeout-ms` and
/// `--max-messages` are noticed promptly (Kafka's `fetch.max.wait.ms` is 500 ms).
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Bytes per partition per Fetch (Kafka's `max.partition.fetch.bytes`).
const PARTITION_MAX_BYTES: i32 = 1 << 20;
/// Bytes per Fetch response (bounded below Kafka's 50 MiB `fetch.max.bytes`: this process
/// holds one response at a time and prints it before fetching again).
const FETCH_MAX_BYTES: i32 = 16 << 20;
/// Kafka's OFFSET_OUT_OF_RANGE and LEADER_NOT_AVAILABLE.
const OFFSET_OUT_OF_RANGE: i16 = 1;
const LEADER_NOT_AVAILABLE: i16 = 5;
/// Metadata refreshes in a row, for partitions whose leader moved or is not ready, before
/// the error is reported: with [`RETRY_BACKOFF`] between them, a few seconds.
const MAX_METADATA_REFRESHES: u32 = 30;
/// Wait before asking Metadata again (Kafka's `retry.backoff.ms` default).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Where to start reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOffset {
    Earliest,
    Latest,
    At(i64),
}

/// Kafka's `--offset`: a non-negative offset, `earliest` or `latest`.
pub fn parse_offset(value: &str) -> Result<StartOffset, String> {
    match value {
        "earliest" => Ok(StartOffset::Earliest),
        "latest" => Ok(StartOffset::Latest),
        n => match n.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(StartOffset::At(n)),
            _ => Err(format!(
                "expected a non-negative offset, earliest or latest, got {value:?}"
            )),
        },
    }
}

/// What each printed record shows (kafka-console-consumer.sh's DefaultMessageFormatter
/// `--property` settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatter {
    pub print_timestamp: bool,
    pub print_partition: bool,
    pub print_offset: bool,
    pub print_headers: bool,
    pub print_key: bool,
    pub print_value: bool,
    pub key_separator: String,
    pub line_separator: String,
    pub headers_separator: String,
    pub headers_key_separator: String,
    pub null_literal: String,
}

impl Default for Formatter {
    fn default() -> Self {
        Formatter {
            print_timestamp: false,
            print_partition: false,
            print_offset: false,
            print_headers: false,
            print_key: false,
            print_value: true,
            key_separator: "\t".to_owned(),
            line_separator: "\n".to_owned(),
            headers_separator: ",".to_owned(),
            headers_key_separator: ":".to_owned(),
            null_literal: "null".to_owned(),
        }
    }
}

/// Parses `--property key=value` settings.
pub fn formatter(properties: &[String]) -> anyhow::Result<Formatter> {
    let mut f = Formatter::default();
    for p in properties {
        let Some((k, v)) = p.split_once('=') else {
            bail!("--property expects key=value, got {p:?}");
        };
        match k {
            "print.timestamp" => f.print_timestamp = parse_bool(k, v)?,
            "print.partition" => f.print_partition = parse_bool(k, v)?,
            "print.offset" => f.print_offset = parse_bool(k, v)?,
            "print.headers" => f.print_headers = parse_bool(k, v)?,
            "print.key" => f.print_key = parse_bool(k, v)?,
            "print.value" => f.print_value = parse_bool(k, v)?,
            "key.separator" => f.key_separator = v.to_owned(),
            "line.separator" => f.line_separator = v.to_owned(),
            "headers.separator" => f.headers_separator = v.to_owned(),
            "headers.key.separator" => f.headers_key_separator = v.to_owned(),
            "null.literal" => f.null_literal = v.to_owned(),
            _ => bail!(
                "unknown property {k:?} (known: print.timestamp, print.partition, print.offset, \
                 print.headers, print.key, print.value, key.separator, line.separator, \
                 headers.separator, headers.key.separator, null.literal)"
            ),
        }
    }
    Ok(f)
}

impl Formatter {
    /// Writes one record as Kafka's DefaultMessageFormatter does: the chosen fields in the
    /// order timestamp, partition, offset, headers, key, value, separated by the key
    /// separator, then the line separator.
    pub fn write(
        &self,
        out: &mut dyn Write,
        partition: i32,
        timestamp_type: TimestampType,
        record: &Record<'_>,
    ) -> std::io::Result<()> {
        let fields = [
            self.print_timestamp,
            self.print_partition,
            self.print_offset,
            self.print_headers,
            self.print_key,
            self.print_value,
        ];
        let mut left = fields.iter().filter(|&&f| f).count();
        let mut sep = |out: &mut dyn Write| -> std::io::Result<()> {
            left -= 1;
            if left > 0 {
                out.write_all(self.key_separator.as_bytes())?;
            }
            Ok(())
        };
        let bytes = |b: Option<&[u8]>| -> Vec<u8> {
            b.map_or_else(|| self.null_literal.as_bytes().to_vec(), <[u8]>::to_vec)
        };
        if self.print_timestamp {
            if record.timestamp < 0 {
                write!(out, "NO_TIMESTAMP")?;
            } else {
                write!(
                    out,
                    "{}:{}",
                    timestamp_type_name(timestamp_type),
                    record.timestamp
                )?;
            }
            sep(out)?;
        }
        if self.print_partition {
            write!(out, "Partition:{partition}")?;
            sep(out)?;
        }
        if self.print_offset {
            write!(out, "Offset:{}", record.offset)?;
            sep(out)?;
        }
        if self.print_headers {
            if record.headers.is_empty() {
                write!(out, "NO_HEADERS")?;
            }
            for (i, h) in record.headers.iter().enumerate() {
                if i > 0 {
                    out.write_all(self.headers_separator.as_bytes())?;
                }
                out.write_all(h.key)?;
                out.write_all(self.headers_key_separator.as_bytes())?;
                out.write_all(&bytes(h.value))?;
            }
            sep(out)?;
        }
        if self.print_key {
            out.write_all(&bytes(record.key))?;
            sep(out)?;
        }
        if self.print_value {
            out.write_all(&bytes(record.value))?;
            sep(out)?;
        }
        out.write_all(self.line_separator.as_bytes())
    }
}

fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// One record as a JSON object (UTF-8 lossy key, value and header values).
pub fn record_json(
    topic: &str,
    partition: i32,
    timestamp_type: TimestampType,
    record: &Record<'_>,
) -> serde_json::Value {
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let headers: Vec<_> = record
        .headers
        .iter()
        .map(|h| json!({ "key": String::from_utf8_lossy(h.key), "value": text(h.value) }))
        .collect();
    json!({
        "topic": topic,
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": timestamp_type_name(timestamp_type),
        "key": text(record.key),
        "value": text(record.value),
        "headers": headers,
    })
}

/// `broker consume`, with kafka-console-consumer.sh's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: CommonProgressArgs,
    #[arg(long)]
    pub topic: String,
    /// Start at the earliest offset rather than the latest.
    #[arg(long)]
    pub from_beginning: bool,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// With --partition: a non-negative offset, earliest or latest (default latest).
    #[arg(long, value_parser = parse_offset, requires = "partition")]
    pub offset: Option<StartOffset>,
    /// Exit after printing this many records.
    #[arg(long)]
    pub max_messages: Option<u64>,
    /// Exit when no record arrived for this long (default: wait for ever).
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Output: print.key, print.offset, print.partition, print.timestamp, print.headers,
    /// print.value (true/false), key.separator, line.separator, null.literal; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Read as a member of this consumer group: the group assigns the partitions, reading
    /// starts at its committed offsets, and the offsets printed are committed.
    #[arg(long, conflicts_with = "partition")]
    pub group: Option<String>,
    /// Consumer settings: group.id (as --group) and auto.offset.reset (earliest or latest,
    /// as --from-beginning); repeatable.
    #[arg(long = "consumer-property", value_name = "KEY=VALUE")]
    pub consumer_properties: Vec<String>,
    /// read_committed leaves out aborted transactions' records; read_uncommitted (the
    /// default) prints every record.
    #[arg(long, default_value = "read_uncommitted", value_parser = parse_isolation_level)]
    pub isolation_level: IsolationLevel,
}

/// Fetch's `isolation_level`, as kafka-console-consumer.sh's `--isolation-level` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadUncommitted = 0,
    ReadCommitted = 1,
}

/// Parses `--isolation-level`: read_committed or read_uncommitted.
pub fn parse_isolation_level(text: &str) -> Result<IsolationLevel, String> {
    match text {
        "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
        "read_committed" => Ok(IsolationLevel::ReadCommitted),
        _ => Err(format!(
            "expected read_committed or read_uncommitted, got {text:?}"
        )),
    }
}

/// The group and whether to start at the earliest offset (else the latest) where nothing
/// was committed, from `--group`, `--from-beginning` and `--consumer-property`, refusing
/// contradictions as kafka-console-consumer.sh does.
pub fn group_and_reset(args: &ConsumeArgs) -> anyhow::Result<(Option<String>, bool)> {
    let mut group = args.group.clone();
    let mut earliest = args.from_beginning;
    for p in &args.consumer_properties {
        let Some((k, v)) = p.split_once('=') else {
            bail!("--consumer-property expects key=value, got {p:?}");
        };
        match k {
            "group.id" => {
                if group.as_deref().is_some_and(|g| g != v) {
                    bail!(
                        "The group ids provided in different places (directly using '--group', \
                         via '--consumer-property') do not match"
                    );
                }
                group = Some(v.to_owned());
            }
            "auto.offset.reset" => {
                let wants_earliest = match v {
                    "earliest" => true,
                    "latest" => false,
                    _ => bail!("auto.offset.reset must be earliest or latest, got {v:?}"),
                };
                if args.from_beginning && !wants_earliest {
                    bail!(
                        "Can't simultaneously specify --from-beginning and \
                         'auto.offset.reset={v}' to consumer"
                    );
                }
                earliest = wants_earliest;
            }
            _ => bail!("unsupported consumer property {k:?} (known: group.id, auto.offset.reset)"),
        }
    }
    if group.is_some() && args.partition.is_some() {
        bail!("Options group and partition cannot be specified together");
    }
    Ok((group, earliest))
}

/// Where a group member starts on `assigned`: the committed offset, else `reset`.
fn group_positions(
    cluster: &mut Cluster,
    member: &GroupMember,
    topic: &str,
    leaders: &[(i32, i32)],
    reset: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let mut positions = member.committed(cluster)?;
    let missing: Vec<(i32, i32)> = leaders
        .iter()
        .copied()
        .filter(|(p, _)| !positions.contains_key(p))
        .collect();
    if !missing.is_empty() {
        positions.extend(cluster.list_offsets(topic, &missing, reset)?);
    }
    Ok(positions)
}

/// Prints the records the arguments ask for to `out`; returns how many were printed.
pub fn run(
    args: &ConsumeArgs,
    out: &mut dyn Write,
    progress: &mut RecordProgress,
) -> anyhow::Result<u64> {
    let format = formatter(&args.properties)?;
    let (group, from_beginning) = group_and_reset(args)?;
    let mut cluster = Cluster::connect(args.common.bootstrap_server())?;
    let mut leaders = cluster.partitions(&args.topic)?;
    let mut member = match &group {
        Some(g) => Some(GroupMember::join(&mut cluster, g, &args.topic)?),
        None => None,
    };
    if let Some(m) = &member {
        leaders.retain(|(p, _)| m.assigned().contains(p));
    }
    if let Some(p) = args.partition {
        leaders.retain(|&(q, _)| q == p);
        if leaders.is_empty() {
            return Err(kafka_error(format!("{}-{p}", args.topic), 3, None).into());
        }
    }
    let reset = if from_beginning { EARLIEST } else { LATEST };
    let start = match args.offset {
        Some(StartOffset::Earliest) => EARLIEST,
        Some(StartOffset::Latest) => LATEST,
        Some(StartOffset::At(_)) => 0,
        None => reset,
    };
    let mut positions = match (&member, args.offset) {
        (Some(m), _) => group_positions(&mut cluster, m, &args.topic, &leaders, reset)?,
        (None, Some(StartOffset::At(n))) => leaders.iter().map(|&(p, _)| (p, n)).collect(),
        (None, _) => cluster.list_offsets(&args.topic, &leaders, start)?,
    };
    let mut printed = 0u64;
    let mut bytes = 0u64;
    let idle_limit = args.timeout_ms.map(Duration::from_millis);
    let mut last_data = Instant::now();
    let mut by_leader = group_by_leader(&leaders);
    // Consecutive rounds that found a partition without a usable leader, and the last
    // error code that said so.
    let mut refreshes = 0u32;
    let mut stale_code = 0i16;
    'outer: loop {
        let mut got_any = false;
        let mut stale = false;
        if let Some(m) = member.as_mut() {
            if let Some(assigned) = m.poll(&mut cluster, &positions)? {
                let mut fresh = cluster.partitions(&args.topic)?;
                fresh.retain(|(p, _)| assigned.contains(p));
                positions = group_positions(&mut cluster, m, &args.topic, &fresh, reset)?;
                by_leader = group_by_leader(&fresh);
            }
        }
        if by_leader.is_empty() {
            // A member the group assigned nothing: no Fetch waits, so wait here.
            std::thread::sleep(Duration::from_millis(FETCH_MAX_WAIT_MS as u64));
        }
        for (&leader, parts) in &by_leader {
            if args.max_messages.is_some_and(|max| printed >= max) {
                break 'outer;
            }
            let wait = match idle_limit {
                Some(limit) => {
                    let left = limit.saturating_sub(last_data.elapsed());
                    (left.as_millis() as i32).clamp(0, FETCH_MAX_WAIT_MS)
                }
                None => FETCH_MAX_WAIT_MS,
            };
            if leader < 0 {
                (stale, stale_code) = (true, LEADER_NOT_AVAILABLE);
                continue;
            }
            let request = fetch_request(&args.topic, parts, &positions, wait, args.isolation_level);
            let resp = fetch(&mut cluster, leader, &request)?;
            if resp.error_code != 0 {
                return Err(kafka_error(
                    format!("Fetch from broker {leader}"),
                    resp.error_code,
                    None,
                )
                .into());
            }
            for t in &resp.responses {
                for pd in &t.partitions {
                    let p = pd.partition_index;
                    if pd.error_code == OFFSET_OUT_OF_RANGE {
                        // The console consumer's auto.offset.reset: earliest with
                        // --from-beginning, else latest.
                        let leader_of = [(p, leader)];
                        let reset_to = cluster.list_offsets(&args.topic, &leader_of, reset)?;
                        positions.extend(reset_to);
                        continue;
                    }
                    if ErrorCode::from_code(pd.error_code).is_some_and(ErrorCode::is_retriable) {
                        // A leader moved or is not ready: ask Metadata again below.
                        (stale, stale_code) = (true, pd.error_code);
                        continue;
                    }
                    if pd.error_code != 0 {
                        return Err(kafka_error(
                            format!("{}-{p}", args.topic),
                            pd.error_code,
                            None,
                        )
                        .into());
                    }
                    let Some(position) = positions.get_mut(&p) else {
                        continue;
                    };
                    let data = pd.records.as_deref().unwrap_or_default();
                    let limit = args.max_messages.map(|max| max - printed);
                    let mut filter = match args.isolation_level {
                        IsolationLevel::ReadCommitted => TxnFilter::read_committed(
                            pd.aborted_transactions.as_deref().unwrap_or_default(),
                        ),
                        IsolationLevel::ReadUncommitted => TxnFilter::none(),
                    };
                    let read = print_batches(
                        data,
                        &args.topic,
                        p,
                        position,
                        &mut filter,
                        &format,
                        args.common.json(),
                        limit,
                        out,
                    )?;
                    if read.records > 0 {
                        got_any = true;
                    }
                    printed += read.records;
                    bytes += read.bytes;
                }
            }
        }
        if stale {
            refreshes += 1;
            if refreshes > MAX_METADATA_REFRESHES {
                return Err(kafka_error(args.topic.clone(), stale_code, None).into());
            }
            std::thread::sleep(RETRY_BACKOFF);
            let mut fresh = cluster.partitions(&args.topic)?;
            if let Some(p) = args.partition {
                fresh.retain(|&(q, _)| q == p);
            }
            if let Some(m) = &member {
                fresh.retain(|(p, _)| m.assigned().contains(p));
            }
            by_leader = group_by_leader(&fresh);
        } else {
            refreshes = 0;
        }
        progress.update(printed, bytes);
        if got_any {
            last_data = Instant::now();
            out.flush()?;
        } else if idle_limit.is_some_and(|limit| last_data.elapsed() >= limit) {
            break;
        }
        if args.max_messages.is_some_and(|max| printed >= max) {
            break;
        }
    }
    out.flush()?;
    if let Some(m) = member {
        m.close(&mut cluster, &positions, &mut std::io::stderr())?;
    }
    progress.finish(printed, bytes);
    Ok(printed)
}

/// Partitions by leader (-1: none known).
fn group_by_leader(leaders: &[(i32, i32)]) -> BTreeMap<i32, Vec<i32>> {
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for &(p, leader) in leaders {
        by_leader.entry(leader).or_default().push(p);
    }
    by_leader
}

/// A sessionless Fetch of `parts` of `topic` from their positions.
fn fetch_request(
    topic: &str,
    parts: &[i32],
    positions: &BTreeMap<i32, i64>,
    max_wait_ms: i32,
    isolation_level: IsolationLevel,
) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes: 1,
        max_bytes: FETCH_MAX_BYTES,
        isolation_level: isolation_level as i8,
        // No fetch session (KIP-227): epoch -1 asks for a full, sessionless fetch.
        session_id: 0,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: topic.to_owned(),
            partitions: parts
                .iter()
                .map(|&p| FetchPartition {
                    partition: p,
                    current_leader_epoch: -1,
                    fetch_offset: positions.get(&p).copied().unwrap_or(0),
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: PARTITION_MAX_BYTES,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fetch(
    cluster: &mut Cluster,
    leader: i32,
    request: &FetchRequest,
) -> anyhow::Result<FetchResponse> {
    let client = cluster.node(leader)?;
    let version = client.version(ApiKey::Fetch, FETCH_MIN_VERSION, FETCH_MAX_VERSION)?;
    Ok(client.request(ApiKey::Fetch, version, request)?)
}

/// What one partition's fetched data yielded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    pub records: u64,
    pub bytes: u64,
}

/// Prints the records at or after `*position` in the batches `data` (one partition's
/// fetched records), at most `limit` of them, advancing `*position` past what was printed
/// (or past whole batches with nothing to print). A batch cut short at the end of `data`
/// is left for the next fetch, as the fetch size allows.
#[allow(clippy::too_many_arguments)]
pub fn print_batches(
    data: &[u8],
    topic: &str,
    partition: i32,
    position: &mut i64,
    filter: &mut TxnFilter,
    format: &Formatter,
    json: bool,
    limit: Option<u64>,
    out: &mut dyn Write,
) -> anyhow::Result<Read> {
    let mut read = Read::default();
    let mut pos = 0;
    while pos < data.len() {
        let header = match BatchHeader::parse(&data[pos..]) {
            Ok(h) => h,
            Err(record_batch::BatchError::Truncated { .. }) => break,
            Err(e) => bail!(
                "{topic}-{partition}: bad batch at offset {}: {e}",
                *position
            ),
        };
        let batch = &data[pos..pos + header.total_bytes()];
        pos += batch.len();
        if record_batch::compute_crc(batch) != Some(header.crc) {
            bail!(
                "{topic}-{partition}: CORRUPT_MESSAGE: the batch at offset {} fails its CRC",
                header.base_offset
            );
        }
        // Every batch feeds the filter, even one before the position: its markers end
        // aborted transactions.
        let skipped = filter.skips(&header, batch);
        if header.next_offset() <= *position {
            continue;
        }
        if skipped {
            *position = header.next_offset();
            continue;
        }
        let records = record_batch::records(batch)
            .map_err(|e| anyhow::anyhow!("{topic}-{partition} at {}: {e}", header.base_offset))?;
        for record in records.iter() {
            let record = record.map_err(|e| {
                anyhow::anyhow!("{topic}-{partition} batch {}: {e}", header.base_offset)
            })?;
            if record.offset < *position {
                continue;
            }
            if limit.is_some_and(|l| read.records >= l) {
                return Ok(read);
            }
            if json {
                let line = record_json(topic, partition, header.timestamp_type(), &record);
                writeln!(out, "{line}")?;
            } else {
                format.write(out, partition, header.timestamp_type(), &record)?;
            }
            read.records += 1;
            read.bytes +=
                (record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len)) as u64;
            *position = record.offset + 1;
        }
        // Compaction may leave a batch's last offsets without records.
        *position = (*position).max(header.next_offset());
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::record_batch::{BatchBuilder, Compression};

    fn batch(base: i64, codec: Compression) -> bytes::Bytes {
        BatchBuilder::new(codec)
            .base_offset(base)
            .push(Some(b"k0"), Some(b"v0"), &[("h", Some(b"x"))], 1_000)
            .push(None, Some(b"v1"), &[], 1_001)
            .push(Some(b"k2"), None, &[], 1_002)
            .build()
    }

    fn print(data: &[u8], position: &mut i64, props: &[&str], limit: Option<u64>) -> String {
        let props: Vec<String> = props.iter().map(|s| (*s).to_owned()).collect();
        let f = formatter(&props).unwrap();
        let mut out = Vec::new();
        print_batches(
            data,
            "t",
            3,
            position,
            &mut TxnFilter::none(),
            &f,
            false,
            limit,
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_only_by_default_and_fields_in_kafkas_order() {
        let data = batch(10, Compression::None);
        let mut pos = 10;
        assert_eq!(print(&data, &mut pos, &[], None), "v0\nv1\nnull\n");
        assert_eq!(pos, 13);
        let mut pos = 10;
        let all = [
            "print.timestamp=true",
            "print.partition=true",
            "print.offset=true",
            "print.headers=true",
            "print.key=true",
            "key.separator=|",
        ];
        assert_eq!(
            print(&data, &mut pos, &all, Some(2)),
            "CreateTime:1000|Partition:3|Offset:10|h:x|k0|v0\n\
             CreateTime:1001|Partition:3|Offset:11|NO_HEADERS|null|v1\n"
        );
        assert_eq!(pos, 12);
        let mut pos = 10;
        assert_eq!(
            print(
                &data,
                &mut pos,
                &["print.key=true", "print.value=false"],
                None
            ),
            "k0\nnull\nk2\n"
        );
    }

    #[test]
    fn skips_records_before_the_position_in_compressed_batches() {
        for codec in Compression::ALL {
            let mut data = batch(0, codec).to_vec();
            data.extend_from_slice(&batch(3, codec));
            let mut pos = 2;
            assert_eq!(
                print(&data, &mut pos, &["print.offset=true"], None),
                "Offset:2\tnull\nOffset:3\tv0\nOffset:4\tv1\nOffset:5\tnull\n",
                "{codec:?}"
            );
            assert_eq!(pos, 6);
        }
    }

    #[test]
    fn a_cut_off_batch_waits_for_the_next_fetch() {
        let mut data = batch(0, Compression::None).to_vec();
        let second = batch(3, Compression::None);
        data.extend_from_slice(&second[..second.len() - 5]);
        let mut pos = 0;
        assert_eq!(print(&data, &mut pos, &[], None), "v0\nv1\nnull\n");
        assert_eq!(pos, 3);
        // A corrupted CRC is an error, not silently skipped.
        let mut bad = batch(0, Compression::None).to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let f = Formatter::default();
        let mut pos = 0;
        let err = print_batches(
            &bad,
            "t",
            0,
            &mut pos,
            &mut TxnFilter::none(),
            &f,
            false,
            None,
            &mut Vec::new(),
        );
        assert!(err.unwrap_err().to_string().contains("CORRUPT_MESSAGE"));
    }

    #[test]
    fn json_lines_carry_every_field() {
        let data = batch(0, Compression::Zstd);
        let mut pos = 0;
        let mut out = Vec::new();
        let f = Formatter::default();
        print_batches(
            &data,
            "t",
            1,
            &mut pos,
            &mut TxnFilter::none(),
            &f,
            true,
            None,
            &mut out,
        )
        .unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["key"], "k0");
        assert_eq!(lines[0]["headers"][0]["value"], "x");
        assert_eq!(lines[2]["value"], serde_json::Value::Null);
        assert_eq!(lines[1]["timestamp_type"], "CreateTime");
        assert_eq!(lines[1]["partition"], 1);
    }

    #[test]
    fn read_committed_is_asked_for_and_drops_aborted_records() {
        let positions = BTreeMap::from([(0, 5)]);
        let committed = parse_isolation_level("read_committed").unwrap();
        assert_eq!(
            fetch_request("t", &[0], &positions, 100, committed).isolation_level,
            1
        );
        let uncommitted = parse_isolation_level("read_uncommitted").unwrap();
        assert_eq!(
            fetch_request("t", &[0], &positions, 100, uncommitted).isolation_level,
            0
        );
        assert!(parse_isolation_level("READ_COMMITTED").is_err());

        // Producer 7's transaction at 0..2 is aborted (marker at 2), producer 8's at 3 kept.
        let txn = |base: i64, producer: i64, value: &[u8]| {
            BatchBuilder::new(Compression::None)
                .base_offset(base)
                .producer(producer, 0, 0)
                .transactional(true)
                .push(None, Some(value), &[], 1_000)
                .push(None, Some(value), &[], 1_000)
                .build()
        };
        let abort_marker = BatchBuilder::new(Compression::None)
            .base_offset(2)
            .producer(7, 0, 0)
            .transactional(true)
            .control(true)
            .push(Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[], 1_000)
            .build();
        let mut data = txn(0, 7, b"aborted").to_vec();
        data.extend_from_slice(&abort_marker);
        data.extend_from_slice(&txn(3, 8, b"kept"));
        let aborted = [wire::generated::fetch_response::AbortedTransaction {
            producer_id: 7,
            first_offset: 0,
            ..Default::default()
        }];
        let f = Formatter::default();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut filter = TxnFilter::read_committed(&aborted);
        print_batches(
            &data,
            "t",
            0,
            &mut pos,
            &mut filter,
            &f,
            false,
            None,
            &mut out,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "kept\nkept\n");
        assert_eq!(pos, 5);
        let mut out = Vec::new();
        let mut pos = 0;
        print_batches(
            &data,
            "t",
            0,
            &mut pos,
            &mut TxnFilter::none(),
            &f,
            false,
            None,
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "aborted\naborted\nkept\nkept\n"
        );
    }

    #[test]
    fn offsets_parse_as_kafkas_flag() {
        assert_eq!(parse_offset("earliest"), Ok(StartOffset::Earliest));
        assert_eq!(parse_offset("latest"), Ok(StartOffset::Latest));
        assert_eq!(parse_offset("42"), Ok(StartOffset::At(42)));
        assert!(parse_offset("-3").is_err());
        assert!(formatter(&["print.nothing=true".into()]).is_err());
    }
}
