//! `broker transactions list|describe|describe-producers|find-hanging|abort`: what Kafka's
//! `kafka-transactions.sh` (TransactionsCommand) does, over the Kafka protocol, with its
//! column names and its table layout (each cell padded to its column's width, then a tab).
//!
//! `list` asks every broker (ListTransactions); `describe` asks the transactional id's
//! coordinator (FindCoordinator, key type 1, then DescribeTransactions); `describe-producers`
//! asks a partition's leader (or `--broker-id`) for its producers (DescribeProducers);
//! `find-hanging` runs Kafka's search: DescribeProducers over the partitions a broker holds,
//! the open transactions whose last write is older than `--max-transaction-timeout`, then
//! ListTransactions (filtered by those producer ids) and DescribeTransactions to keep only
//! those the coordinator no longer tracks on that partition; `abort` writes an ABORT marker
//! (WriteTxnMarkers) to the partition's leader for one producer, found by the start offset of
//! its open transaction (DescribeProducers) or given explicitly.
//!
//! Runs on the caller's thread with blocking connections; DescribeProducers and
//! ListTransactions filters go out in batches of at most [`BATCH_MAX`] entries, as Kafka's
//! tool sends them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};
use wire::generated::api::ApiKey;
use wire::generated::describe_producers_request::TopicRequest;
use wire::generated::describe_producers_response::ProducerState;
use wire::generated::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use wire::generated::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    ListTransactionsRequest, ListTransactionsResponse, MetadataResponse, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use wire::ErrorCode;

use super::routing::{kafka_error, leaders, Cluster};
use super::CommonArgs;

/// The most partitions (DescribeProducers) or topics a single request names, as Kafka's
/// tool batches them so that one broker is not handed a giant request.
pub const BATCH_MAX: usize = 500;

/// FindCoordinator's key type for transactional ids (0 is groups).
const KEY_TYPE_TRANSACTION: i8 = 1;

const MS_PER_MINUTE: i64 = 60_000;

const LIST_COLUMNS: [&str; 4] = [
    "TransactionalId",
    "Coordinator",
    "ProducerId",
    "TransactionState",
];

const DESCRIBE_COLUMNS: [&str; 9] = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
];

const PRODUCER_COLUMNS: [&str; 6] = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
];

const HANGING_COLUMNS: [&str; 8] = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
];

/// `broker transactions ...`, with kafka-transactions.sh's subcommands and flags.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TransactionsCommand {
    /// Lists the transactions every broker coordinates.
    List {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Describes the state of a transactional id, as its coordinator holds it.
    Describe {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        transactional_id: String,
    },
    /// Describes the active producers of a topic partition.
    DescribeProducers {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        /// Ask this replica instead of the partition's leader.
        #[arg(long)]
        broker_id: Option<i32>,
    },
    /// Finds hanging transactions: open on a partition, older than the maximum transaction
    /// timeout, and no longer tracked there by their coordinator.
    FindHanging {
        #[command(flatten)]
        common: CommonArgs,
        /// Search the partitions this broker holds a replica of.
        #[arg(long, required_unless_present = "topic")]
        broker_id: Option<i32>,
        /// Limit the search to this topic.
        #[arg(long)]
        topic: Option<String>,
        /// Limit the search to this partition of --topic.
        #[arg(long, requires = "topic")]
        partition: Option<i32>,
        /// Minutes: a transaction open longer than this is a candidate.
        #[arg(long, default_value_t = 15, value_name = "MINUTES")]
        max_transaction_timeout: i64,
    },
    /// Aborts a (hanging) transaction on one partition by writing an ABORT marker.
    Abort(AbortArgs),
}

/// `transactions abort`: the partition and either the transaction's start offset or the
/// producer id, producer epoch and coordinator epoch to write the marker with.
#[derive(Debug, Clone, clap::Args)]
pub struct AbortArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long)]
    pub topic: String,
    #[arg(long)]
    pub partition: i32,
    /// The start offset of the open transaction to abort (its producer is looked up).
    #[arg(
        long,
        required_unless_present = "producer_id",
        conflicts_with = "producer_id"
    )]
    pub start_offset: Option<i64>,
    #[arg(long, requires_all = ["producer_epoch", "coordinator_epoch"])]
    pub producer_id: Option<i64>,
    #[arg(long, requires = "producer_id")]
    pub producer_epoch: Option<i16>,
    /// A negative epoch (never committed or aborted) is sent as 0, as Kafka's tool does.
    #[arg(long, requires = "producer_id", allow_negative_numbers = true)]
    pub coordinator_epoch: Option<i32>,
}

impl TransactionsCommand {
    /// Runs the command: a table (or JSON lines) to `out`.
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            TransactionsCommand::List { common } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let listed = list(&mut cluster, &[])?;
                list_table(&listed).print(common.json, out)
            }
            TransactionsCommand::Describe {
                common,
                transactional_id,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let described = describe(&mut cluster, &transactional_id)?.with_context(|| {
                    format!(
                        "Failed to describe transaction state of transactional-id \
                             `{transactional_id}`"
                    )
                })?;
                describe_table(&described, now_ms()).print(common.json, out)
            }
            TransactionsCommand::DescribeProducers {
                common,
                topic,
                partition,
                broker_id,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let node = match broker_id {
                    Some(node) => {
                        cluster.metadata(Some(&[]))?;
                        node
                    }
                    None => leader_of(&mut cluster, &topic, partition)?,
                };
                let producers = describe_producers(&mut cluster, node, &topic, partition)
                    .with_context(|| {
                        format!("Failed to describe producers for partition {topic}-{partition}")
                    })?;
                producers_table(&producers).print(common.json, out)
            }
            TransactionsCommand::FindHanging {
                common,
                broker_id,
                topic,
                partition,
                max_transaction_timeout,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let search = Search {
                    broker_id,
                    topic,
                    partition,
                    max_transaction_timeout_ms: max_transaction_timeout
                        .saturating_mul(MS_PER_MINUTE),
                };
                let now = now_ms();
                let hanging = find_hanging(&mut cluster, &search, now)?;
                hanging_table(&hanging, now).print(common.json, out)
            }
            TransactionsCommand::Abort(args) => {
                let mut cluster = Cluster::connect(&args.common.bootstrap_server)?;
                let marker = abort(&mut cluster, &args)?;
                if args.common.json {
                    writeln!(
                        out,
                        "{}",
                        json!({
                            "topic": args.topic,
                            "partition": args.partition,
                            "producer_id": marker.producer_id,
                            "producer_epoch": marker.producer_epoch,
                            "coordinator_epoch": marker.coordinator_epoch,
                        })
                    )?;
                }
                Ok(())
            }
        }
    }
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Tables.

/// Rows under Kafka's column names. Cells are JSON values so that `--json` keeps numbers as
/// numbers; in the text table a null cell prints as Kafka prints an absent value, `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: &'static [&'static str],
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    fn new(columns: &'static [&'static str]) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<Value>) {
        assert_eq!(
            row.len(),
            self.columns.len(),
            "a row has one cell per column"
        );
        self.rows.push(row);
    }

    fn cell_text(cell: &Value) -> String {
        match cell {
            Value::Null => "None".to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    /// Kafka's `prettyPrintTable`: every cell left-aligned in a column as wide as its widest
    /// cell (header included), each followed by a tab.
    pub fn render(&self) -> String {
        let texts: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| row.iter().map(Table::cell_text).collect())
            .collect();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.len()).collect();
        for row in &texts {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let mut text = String::new();
        let header: Vec<String> = self.columns.iter().map(|c| (*c).to_owned()).collect();
        for row in std::iter::once(&header).chain(&texts) {
            for (cell, width) in row.iter().zip(&widths) {
                text.push_str(&format!("{cell:<width$}\t"));
            }
            text.push('\n');
        }
        text
    }

    /// One JSON object per row, keyed by the column names.
    pub fn json_lines(&self) -> Vec<Value> {
        self.rows
            .iter()
            .map(|row| {
                let object: Map<String, Value> = self
                    .columns
                    .iter()
                    .map(|c| (*c).to_owned())
                    .zip(row.iter().cloned())
                    .collect();
                Value::Object(object)
            })
            .collect()
    }

    pub fn print(&self, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
        if json {
            for line in self.json_lines() {
                writeln!(out, "{line}")?;
            }
        } else {
            out.write_all(self.render().as_bytes())?;
        }
        Ok(())
    }
}

/// `None` for Kafka's "absent" sentinels (-1 start offsets, times and epochs).
fn present(value: i64) -> Value {
    if value < 0 {
        Value::Null
    } else {
        json!(value)
    }
}

pub fn list_table(listed: &[Listed]) -> Table {
    let mut table = Table::new(&LIST_COLUMNS);
    for l in listed {
        table.push(vec![
            json!(l.transactional_id),
            json!(l.coordinator),
            json!(l.producer_id),
            json!(l.state),
        ]);
    }
    table
}

pub fn describe_table(d: &Described, now_ms: i64) -> Table {
    let mut table = Table::new(&DESCRIBE_COLUMNS);
    let (start, duration) = if d.transaction_start_time_ms >= 0 {
        (
            json!(d.transaction_start_time_ms),
            json!(now_ms - d.transaction_start_time_ms),
        )
    } else {
        (Value::Null, Value::Null)
    };
    let partitions: Vec<String> = d
        .topic_partitions
        .iter()
        .map(|(t, p)| format!("{t}-{p}"))
        .collect();
    table.push(vec![
        json!(d.coordinator_id),
        json!(d.transactional_id),
        json!(d.producer_id),
        json!(d.producer_epoch),
        json!(d.state),
        json!(d.transaction_timeout_ms),
        start,
        duration,
        json!(partitions.join(",")),
    ]);
    table
}

pub fn producers_table(producers: &[ProducerState]) -> Table {
    let mut table = Table::new(&PRODUCER_COLUMNS);
    for p in producers {
        table.push(vec![
            json!(p.producer_id),
            json!(p.producer_epoch),
            json!(p.coordinator_epoch.max(-1)),
            json!(p.last_sequence),
            json!(p.last_timestamp),
            present(p.current_txn_start_offset),
        ]);
    }
    table
}

pub fn hanging_table(hanging: &[OpenTransaction], now_ms: i64) -> Table {
    let mut table = Table::new(&HANGING_COLUMNS);
    for h in hanging {
        table.push(vec![
            json!(h.topic),
            json!(h.partition),
            json!(h.producer.producer_id),
            json!(h.producer.producer_epoch),
            json!(h.producer.coordinator_epoch.max(-1)),
            json!(h.producer.current_txn_start_offset.max(-1)),
            json!(h.producer.last_timestamp),
            json!((now_ms - h.producer.last_timestamp) / MS_PER_MINUTE),
        ]);
    }
    table
}

// ---------------------------------------------------------------------------------------------
// list and describe.

/// One transaction as ListTransactions names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub transactional_id: String,
    pub coordinator: i32,
    pub producer_id: i64,
    pub state: String,
}

/// Every transaction every broker coordinates (only those of `producer_ids` when not
/// empty), ordered by coordinator, then transactional id.
pub fn list(cluster: &mut Cluster, producer_ids: &[i64]) -> anyhow::Result<Vec<Listed>> {
    cluster.metadata(Some(&[]))?;
    let mut listed = Vec::new();
    for node in cluster.node_ids() {
        let client = cluster.node(node)?;
        let version = client.version(ApiKey::ListTransactions, 0, 1)?;
        // An empty filter means "every producer", so the filtered question is asked in
        // batches and never with an empty batch.
        let batches: Vec<&[i64]> = if producer_ids.is_empty() {
            vec![&[]]
        } else {
            producer_ids.chunks(BATCH_MAX).collect()
        };
        for batch in batches {
            let request = ListTransactionsRequest {
                producer_id_filters: batch.to_vec(),
                ..Default::default()
            };
            let resp: ListTransactionsResponse =
                client.request(ApiKey::ListTransactions, version, &request)?;
            if resp.error_code != 0 {
                return Err(kafka_error(
                    format!("ListTransactions of broker {node}"),
                    resp.error_code,
                    None,
                )
                .into());
            }
            listed.extend(resp.transaction_states.into_iter().map(|t| Listed {
                transactional_id: t.transactional_id,
                coordinator: node,
                producer_id: t.producer_id,
                state: t.transaction_state,
            }));
        }
    }
    listed.sort_by(|a, b| {
        (a.coordinator, &a.transactional_id).cmp(&(b.coordinator, &b.transactional_id))
    });
    Ok(listed)
}

/// What DescribeTransactions said about one transactional id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Described {
    pub coordinator_id: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: String,
    pub transaction_timeout_ms: i32,
    /// -1 when no transaction is open.
    pub transaction_start_time_ms: i64,
    /// The partitions of the open transaction (or those still owed a marker).
    pub topic_partitions: BTreeSet<(String, i32)>,
}

/// The coordinator (node id) of `transactional_id`: FindCoordinator with key type 1. The
/// node must be one Metadata named, so Metadata is asked first.
pub fn txn_coordinator(cluster: &mut Cluster, transactional_id: &str) -> anyhow::Result<i32> {
    cluster.metadata(Some(&[]))?;
    let client = cluster.bootstrap();
    // v1 is the first with a key type; v4 (KIP-699) asks in batches.
    let version = client.version(ApiKey::FindCoordinator, 1, i16::MAX)?;
    let request = if version >= 4 {
        FindCoordinatorRequest {
            key_type: KEY_TYPE_TRANSACTION,
            coordinator_keys: vec![transactional_id.to_owned()],
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            key: transactional_id.to_owned(),
            key_type: KEY_TYPE_TRANSACTION,
            ..Default::default()
        }
    };
    let resp: FindCoordinatorResponse =
        client.request(ApiKey::FindCoordinator, version, &request)?;
    let (code, message, node) = if version >= 4 {
        let Some(c) = resp.coordinators.first() else {
            bail!(
                "FindCoordinator answered no coordinator for transactional id {transactional_id}"
            );
        };
        (c.error_code, c.error_message.clone(), c.node_id)
    } else {
        (resp.error_code, resp.error_message.clone(), resp.node_id)
    };
    if code != 0 {
        return Err(kafka_error(
            format!("coordinator of transactional id {transactional_id}"),
            code,
            message.as_deref(),
        )
        .into());
    }
    Ok(node)
}

/// DescribeTransactions of `transactional_id` at its coordinator; `Ok(None)` when the
/// coordinator does not know it (TRANSACTIONAL_ID_NOT_FOUND).
pub fn describe(
    cluster: &mut Cluster,
    transactional_id: &str,
) -> anyhow::Result<Result<Described, anyhow::Error>> {
    let node = txn_coordinator(cluster, transactional_id)?;
    let client = cluster.node(node)?;
    let version = client.version(ApiKey::DescribeTransactions, 0, 0)?;
    let request = DescribeTransactionsRequest {
        transactional_ids: vec![transactional_id.to_owned()],
        ..Default::default()
    };
    let resp: DescribeTransactionsResponse =
        client.request(ApiKey::DescribeTransactions, version, &request)?;
    let Some(s) = resp
        .transaction_states
        .into_iter()
        .find(|s| s.transactional_id == transactional_id)
    else {
        bail!("DescribeTransactions answered nothing for transactional id {transactional_id}");
    };
    if s.error_code != 0 {
        return Ok(Err(kafka_error(
            format!("transactional id {transactional_id}"),
            s.error_code,
            None,
        )
        .into()));
    }
    Ok(Ok(Described {
        coordinator_id: node,
        transactional_id: s.transactional_id,
        producer_id: s.producer_id,
        producer_epoch: s.producer_epoch,
        state: s.transaction_state,
        transaction_timeout_ms: s.transaction_timeout_ms,
        transaction_start_time_ms: s.transaction_start_time_ms,
        topic_partitions: s
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic;
                t.partitions.into_iter().map(move |p| (topic.clone(), p))
            })
            .collect(),
    }))
}

// ---------------------------------------------------------------------------------------------
// describe-producers.

fn leader_in(md: &MetadataResponse, topic: &str, partition: i32) -> anyhow::Result<i32> {
    let Some(&(_, leader)) = leaders(md, topic)?.iter().find(|(p, _)| *p == partition) else {
        return Err(kafka_error(format!("{topic}-{partition}"), 3, None).into());
    };
    if leader < 0 {
        return Err(kafka_error(format!("{topic}-{partition}"), 5, None).into());
    }
    Ok(leader)
}

/// The leader of `topic`-`partition` (Metadata, never creating the topic).
fn leader_of(cluster: &mut Cluster, topic: &str, partition: i32) -> anyhow::Result<i32> {
    let md = cluster.metadata(Some(&[topic.to_owned()]))?;
    leader_in(&md, topic, partition)
}

/// DescribeProducers of some partitions at broker `node`: per partition its active
/// producers, or the partition's error.
fn describe_producers_at(
    cluster: &mut Cluster,
    node: i32,
    partitions: &[(String, i32)],
) -> anyhow::Result<BTreeMap<(String, i32), Vec<ProducerState>>> {
    let client = cluster.node(node)?;
    let version = client.version(ApiKey::DescribeProducers, 0, 0)?;
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let request = DescribeProducersRequest {
        topics: by_topic
            .into_iter()
            .map(|(name, partition_indexes)| TopicRequest {
                name: name.to_owned(),
                partition_indexes,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let resp: DescribeProducersResponse =
        client.request(ApiKey::DescribeProducers, version, &request)?;
    let mut found = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            let what = format!("{}-{} on broker {node}", t.name, p.partition_index);
            if p.error_code != 0 {
                return Err(kafka_error(what, p.error_code, p.error_message.as_deref()).into());
            }
            found.insert((t.name.clone(), p.partition_index), p.active_producers);
        }
    }
    for key in partitions {
        if !found.contains_key(key) {
            bail!(
                "DescribeProducers of broker {node} answered nothing for {}-{}",
                key.0,
                key.1
            );
        }
    }
    Ok(found)
}

/// The active producers of one partition, as broker `node` holds them.
pub fn describe_producers(
    cluster: &mut Cluster,
    node: i32,
    topic: &str,
    partition: i32,
) -> anyhow::Result<Vec<ProducerState>> {
    let key = (topic.to_owned(), partition);
    let mut found = describe_producers_at(cluster, node, std::slice::from_ref(&key))?;
    Ok(found.remove(&key).unwrap_or_default())
}

mod abort;
mod hanging;
#[cfg(test)]
mod tests;

pub use abort::*;
pub use hanging::*;
