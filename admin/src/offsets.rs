//! `broker get-offsets`: kafka-get-offsets.sh over the Kafka protocol. Metadata lists the
//! topics (filtered by `--topic` regex and `--partitions`, or `--topic-partitions` patterns)
//! and each partition's leader; one ListOffsets per leader (in bounded batches) asks for the
//! offset at `--time`. Prints `topic:partition:offset` sorted as Kafka's tool sorts them
//! (by the string `topic-partition`), leaving out partitions with no such offset (a timestamp
//! after the last record). A partition whose leader answers an error is reported on stderr by
//! the error's name; unlike Kafka's tool (which exits 0), the command then exits 1, so that a
//! script notices.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use wire::generated::{ListOffsetsRequest, ListOffsetsResponse, MetadataResponse};

use super::client::{error_message, error_name, Client};
use super::progress::Progress;
use super::topic_filter::TopicPartitionFilter;
use super::CommonProgressArgs;

/// Partitions asked per ListOffsets request: bounds each request and response (and shows
/// progress between them) when a leader has thousands of partitions.
pub const LIST_OFFSETS_BATCH_PARTITIONS: usize = 1_000;
/// ListOffsets' "no offset" answer (a timestamp after every record).
const UNKNOWN_OFFSET: i64 = -1;

/// Kafka's special timestamps of ListOffsets.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

/// Parses `--time` as kafka-get-offsets.sh does.
pub fn parse_time(s: &str) -> Result<i64, String> {
    match s {
        "earliest" => Ok(EARLIEST),
        "latest" => Ok(LATEST),
        "max-timestamp" => Ok(MAX_TIMESTAMP),
        "earliest-local" => Ok(EARLIEST_LOCAL),
        "latest-tiered" => Ok(LATEST_TIERED),
        other => other.parse::<i64>().map_err(|_| {
            format!(
                "Malformed time argument {other}. Please use -1 or latest / -2 or earliest / -3 \
                 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified \
                 long format timestamp"
            )
        }),
    }
}

/// The lowest ListOffsets version that carries `timestamp`'s meaning.
fn min_version(timestamp: i64) -> i16 {
    match timestamp {
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        _ => 1,
    }
}

/// `broker get-offsets`, with kafka-get-offsets.sh's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct GetOffsetsArgs {
    #[command(flatten)]
    pub common: CommonProgressArgs,
    /// The topic (a regular expression matched against whole names; default every topic).
    #[arg(long, conflicts_with = "topic_partitions")]
    pub topic: Option<String>,
    /// Comma-separated partition ids (default every partition).
    #[arg(long, value_name = "IDS", conflicts_with = "topic_partitions")]
    pub partitions: Option<String>,
    /// Comma-separated `TOPIC_REGEX[:N|:N-M|:N-|:-M]` patterns (M exclusive).
    #[arg(long, value_name = "PATTERNS")]
    pub topic_partitions: Option<String>,
    /// earliest|latest|max-timestamp|earliest-local|latest-tiered, -1..-5, or a timestamp in
    /// milliseconds (the first offset whose timestamp is at or after it).
    #[arg(long, default_value = "latest", value_parser = parse_time, allow_hyphen_values = true)]
    pub time: i64,
    /// Leave out internal topics.
    #[arg(long)]
    pub exclude_internal_topics: bool,
}

/// One partition's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

/// A partition that could not be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub topic: String,
    pub partition: i32,
    pub error: String,
    pub message: String,
}

/// The partitions to ask, by leader: (topic, partition) pairs.
type ByLeader = BTreeMap<i32, Vec<(String, i32)>>;

/// The partitions `filter` selects, grouped by leader, and those without a leader.
fn select(
    metadata: &MetadataResponse,
    filter: &TopicPartitionFilter,
    exclude_internal: bool,
) -> (ByLeader, Vec<Skipped>) {
    let mut by_leader = ByLeader::new();
    let mut skipped = Vec::new();
    for topic in &metadata.topics {
        let Some(name) = topic.name.as_deref() else {
            continue;
        };
        if topic.error_code != 0
            || (exclude_internal && topic.is_internal)
            || !filter.topic_allowed(name)
        {
            continue;
        }
        for p in &topic.partitions {
            if !filter.allowed(name, p.partition_index) {
                continue;
            }
            if p.leader_id < 0 {
                let code = wire::ErrorCode::LeaderNotAvailable.code();
                skipped.push(Skipped {
                    topic: name.to_owned(),
                    partition: p.partition_index,
                    error: error_name(code),
                    message: error_message(code).to_owned(),
                });
                continue;
            }
            by_leader
                .entry(p.leader_id)
                .or_default()
                .push((name.to_owned(), p.partition_index));
        }
    }
    (by_leader, skipped)
}

/// Kafka's order: by the string `topic-partition` (so `t-10` sorts before `t-2`).
fn sort_as_kafka(offsets: &mut [PartitionOffset]) {
    offsets.sort_by_cached_key(|o| format!("{}-{}", o.topic, o.partition));
}

/// Runs get-offsets, printing to `out`; progress and skipped partitions go to stderr.
pub fn run(args: &GetOffsetsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let filter = match &args.topic_partitions {
        Some(patterns) => TopicPartitionFilter::from_patterns(patterns),
        None => TopicPartitionFilter::from_topic_and_partitions(
            args.topic.as_deref(),
            args.partitions.as_deref(),
        ),
    }
    .map_err(anyhow::Error::msg)?;
    let mut bootstrap = Client::connect(args.common.bootstrap_server())?;
    let metadata = super::topics::metadata(&mut bootstrap, None)?;
    let (by_leader, mut skipped) = select(&metadata, &filter, args.exclude_internal_topics);
    let total: usize = by_leader.values().map(Vec::len).sum::<usize>() + skipped.len();
    if total == 0 {
        bail!("Could not match any topic-partitions with the specified filters");
    }
    let addresses: HashMap<i32, String> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
        .collect();
    let single_broker = metadata.brokers.len() == 1;
    let mut progress = Progress::stderr("partitions", total as u64, args.common.progress);
    progress.advance(skipped.len() as u64);
    let mut offsets = Vec::with_capacity(total);
    let mut bootstrap = Some(bootstrap);
    for (leader, partitions) in by_leader {
        let address = addresses.get(&leader);
        // A single-node cluster's leader is the bootstrap broker, whatever address it
        // advertises (a container's may not be reachable from here).
        let reuse =
            single_broker || address.map(String::as_str) == Some(args.common.bootstrap_server());
        let mut client = match (reuse, bootstrap.take()) {
            (true, Some(c)) => c,
            (_, taken) => {
                bootstrap = taken;
                let Some(address) = address else {
                    bail!("Metadata names broker {leader} as a leader but does not list it");
                };
                Client::connect(address)
                    .with_context(|| format!("connecting to broker {leader}"))?
            }
        };
        let version = client.version(ApiKey::ListOffsets, min_version(args.time), i16::MAX)?;
        for chunk in partitions.chunks(LIST_OFFSETS_BATCH_PARTITIONS) {
            let (ok, bad) = list_offsets(&mut client, version, chunk, args.time)?;
            offsets.extend(ok);
            skipped.extend(bad);
            progress.advance(chunk.len() as u64);
        }
        if reuse {
            bootstrap = Some(client);
        }
    }
    progress.finish();
    sort_as_kafka(&mut offsets);
    for o in &offsets {
        if args.common.json() {
            writeln!(
                out,
                "{}",
                json!({
                    "topic": o.topic,
                    "partition": o.partition,
                    "offset": o.offset,
                    "timestamp": o.timestamp,
                    "leader_epoch": o.leader_epoch,
                })
            )?;
        } else {
            writeln!(out, "{}:{}:{}", o.topic, o.partition, o.offset)?;
        }
    }
    out.flush()?;
    if skipped.is_empty() {
        return Ok(());
    }
    skipped.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    for s in &skipped {
        eprintln!(
            "Skip getting offsets for topic-partition {}-{} due to error: {}: {}",
            s.topic, s.partition, s.error, s.message
        );
    }
    bail!("{} partition(s) could not be answered", skipped.len())
}

/// One ListOffsets request for `partitions` (same leader).
fn list_offsets(
    client: &mut Client,
    version: i16,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> anyhow::Result<(Vec<PartitionOffset>, Vec<Skipped>)> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (topic, partition) in partitions {
        if topics.last().is_none_or(|t| &t.name != topic) {
            topics.push(ListOffsetsTopic {
                name: topic.clone(),
                partitions: Vec::new(),
                ..Default::default()
            });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(ListOffsetsPartition {
                partition_index: *partition,
                current_leader_epoch: -1,
                timestamp,
                max_num_offsets: 1,
                ..Default::default()
            });
        }
    }
    let request = ListOffsetsRequest {
        replica_id: -1,
        // kafka-get-offsets.sh's admin client reads uncommitted.
        isolation_level: 0,
        topics,
        ..Default::default()
    };
    let resp: ListOffsetsResponse = client.request(ApiKey::ListOffsets, version, &request)?;
    let mut ok = Vec::with_capacity(partitions.len());
    let mut bad = Vec::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                bad.push(Skipped {
                    topic: t.name.clone(),
                    partition: p.partition_index,
                    error: error_name(p.error_code),
                    message: error_message(p.error_code).to_owned(),
                });
            } else if p.offset != UNKNOWN_OFFSET {
                ok.push(PartitionOffset {
                    topic: t.name.clone(),
                    partition: p.partition_index,
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: p.leader_epoch,
                });
            }
        }
    }
    Ok((ok, bad))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use wire::generated::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GetOffsetsArgs,
    }

    fn parse(args: &[&str]) -> Result<GetOffsetsArgs, clap::Error> {
        let mut all = vec!["x", "--bootstrap-server", "h:1"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn time_flag_as_kafka_get_offsets() {
        assert_eq!(parse(&[]).unwrap().time, LATEST);
        assert_eq!(parse(&["--time", "earliest"]).unwrap().time, EARLIEST);
        assert_eq!(parse(&["--time", "-2"]).unwrap().time, EARLIEST);
        assert_eq!(
            parse(&["--time", "max-timestamp"]).unwrap().time,
            MAX_TIMESTAMP
        );
        assert_eq!(parse(&["--time", "-3"]).unwrap().time, MAX_TIMESTAMP);
        assert_eq!(
            parse(&["--time", "1700000000000"]).unwrap().time,
            1_700_000_000_000
        );
        let err = parse(&["--time", "yesterday"]).unwrap_err().to_string();
        assert!(err.contains("Malformed time argument yesterday"), "{err}");
        assert!(parse(&["--topic", "t", "--topic-partitions", "t:0"]).is_err());
        assert_eq!(min_version(MAX_TIMESTAMP), 7);
        assert_eq!(min_version(1_700_000_000_000), 1);
    }

    fn topic(name: &str, leaders: &[i32], internal: bool) -> MetadataResponseTopic {
        MetadataResponseTopic {
            name: Some(name.to_owned()),
            is_internal: internal,
            partitions: leaders
                .iter()
                .enumerate()
                .map(|(i, &leader_id)| MetadataResponsePartition {
                    partition_index: i as i32,
                    leader_id,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn partitions_are_grouped_by_leader_and_filtered() {
        let md = MetadataResponse {
            topics: vec![
                topic("a", &[1, 2, 1], false),
                topic("b", &[2, -1], false),
                topic("__consumer_offsets", &[1], true),
            ],
            ..Default::default()
        };
        let all = TopicPartitionFilter::from_topic_and_partitions(None, None).unwrap();
        let (by_leader, skipped) = select(&md, &all, false);
        assert_eq!(
            by_leader[&1],
            vec![
                ("a".to_owned(), 0),
                ("a".to_owned(), 2),
                ("__consumer_offsets".to_owned(), 0)
            ]
        );
        assert_eq!(
            by_leader[&2],
            vec![("a".to_owned(), 1), ("b".to_owned(), 0)]
        );
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].error, "LEADER_NOT_AVAILABLE");
        let (by_leader, _) = select(&md, &all, true);
        assert_eq!(by_leader[&1].len(), 2);
        let a0 = TopicPartitionFilter::from_topic_and_partitions(Some("a"), Some("0")).unwrap();
        let (by_leader, skipped) = select(&md, &a0, false);
        assert_eq!(by_leader.len(), 1);
        assert_eq!(by_leader[&1], vec![("a".to_owned(), 0)]);
        assert!(skipped.is_empty());
    }

    #[test]
    fn output_is_sorted_as_kafkas_tool_sorts_it() {
        let o = |topic: &str, partition| PartitionOffset {
            topic: topic.to_owned(),
            partition,
            offset: 0,
            timestamp: -1,
            leader_epoch: 0,
        };
        let mut v = vec![o("t", 2), o("t", 10), o("s", 1), o("t", 1)];
        sort_as_kafka(&mut v);
        let order: Vec<_> = v.iter().map(|o| (o.topic.as_str(), o.partition)).collect();
        assert_eq!(order, vec![("s", 1), ("t", 1), ("t", 10), ("t", 2)]);
    }
}
