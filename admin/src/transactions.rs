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

// ---------------------------------------------------------------------------------------------
// find-hanging.

/// Where find-hanging looks and how old a transaction must be to be a candidate.
#[derive(Debug, Clone)]
pub struct Search {
    pub broker_id: Option<i32>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub max_transaction_timeout_ms: i64,
}

/// An open transaction on one partition: the producer that holds it there.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTransaction {
    pub topic: String,
    pub partition: i32,
    pub producer: ProducerState,
}

/// The partitions to search, each with the broker to ask: `--broker-id` where given (only
/// partitions it holds a replica of), else each partition's leader.
pub fn partitions_to_search(md: &MetadataResponse, search: &Search) -> Vec<((String, i32), i32)> {
    let mut found = Vec::new();
    for t in &md.topics {
        let Some(name) = t.name.as_deref() else {
            continue;
        };
        if t.error_code != 0 || search.topic.as_deref().is_some_and(|want| want != name) {
            continue;
        }
        for p in &t.partitions {
            if search
                .partition
                .is_some_and(|want| want != p.partition_index)
            {
                continue;
            }
            let node = match search.broker_id {
                Some(b) if p.replica_nodes.contains(&b) => b,
                Some(_) => continue,
                None if p.leader_id >= 0 => p.leader_id,
                None => continue,
            };
            found.push(((name.to_owned(), p.partition_index), node));
        }
    }
    found.sort();
    found
}

/// Kafka's candidates: producers with an open transaction whose last write is older than
/// the maximum transaction timeout (a live transaction would have been timed out by now).
pub fn candidates(
    producers: &BTreeMap<(String, i32), Vec<ProducerState>>,
    max_transaction_timeout_ms: i64,
    now_ms: i64,
) -> Vec<OpenTransaction> {
    let mut open = Vec::new();
    for ((topic, partition), states) in producers {
        for p in states {
            if p.current_txn_start_offset >= 0
                && now_ms - p.last_timestamp > max_transaction_timeout_ms
            {
                open.push(OpenTransaction {
                    topic: topic.clone(),
                    partition: *partition,
                    producer: p.clone(),
                });
            }
        }
    }
    open
}

/// Kafka's filter: a candidate is hanging unless its producer id still belongs to a
/// transactional id (`transactional_ids`, from ListTransactions) whose coordinator still
/// names this partition in the transaction of that producer (`descriptions`: `None` where
/// the coordinator no longer knows the id). A partition still named is one the coordinator
/// will write a marker to.
pub fn filter_hanging(
    candidates: Vec<OpenTransaction>,
    transactional_ids: &BTreeMap<i64, String>,
    descriptions: &BTreeMap<String, Option<Described>>,
) -> Vec<OpenTransaction> {
    candidates
        .into_iter()
        .filter(|c| {
            let Some(id) = transactional_ids.get(&c.producer.producer_id) else {
                return true;
            };
            let Some(Some(d)) = descriptions.get(id) else {
                return true;
            };
            d.producer_id != c.producer.producer_id
                || !d.topic_partitions.contains(&(c.topic.clone(), c.partition))
        })
        .collect()
}

/// Runs the search over the cluster.
pub fn find_hanging(
    cluster: &mut Cluster,
    search: &Search,
    now_ms: i64,
) -> anyhow::Result<Vec<OpenTransaction>> {
    let topics = search.topic.as_ref().map(|t| vec![t.clone()]);
    let md = cluster.metadata(topics.as_deref())?;
    if let Some(topic) = &search.topic {
        // A named topic that does not exist is an error, not an empty search.
        leaders(&md, topic)?;
    }
    let mut by_node: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (key, node) in partitions_to_search(&md, search) {
        by_node.entry(node).or_default().push(key);
    }
    let mut producers = BTreeMap::new();
    for (node, partitions) in by_node {
        for batch in partitions.chunks(BATCH_MAX) {
            let found = describe_producers_at(cluster, node, batch).with_context(|| {
                format!(
                    "Failed to describe producers for {} partitions on broker {node}",
                    batch.len()
                )
            })?;
            producers.extend(found);
        }
    }
    let open = candidates(&producers, search.max_transaction_timeout_ms, now_ms);
    if open.is_empty() {
        return Ok(open);
    }
    let producer_ids: Vec<i64> = open
        .iter()
        .map(|o| o.producer.producer_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let transactional_ids: BTreeMap<i64, String> = list(cluster, &producer_ids)?
        .into_iter()
        .filter(|l| producer_ids.contains(&l.producer_id))
        .map(|l| (l.producer_id, l.transactional_id))
        .collect();
    let mut descriptions = BTreeMap::new();
    for id in transactional_ids.values() {
        let described = match describe(cluster, id)? {
            Ok(d) => Some(d),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e),
        };
        descriptions.insert(id.clone(), described);
    }
    Ok(filter_hanging(open, &transactional_ids, &descriptions))
}

fn is_not_found(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<super::routing::KafkaError>()
        .is_some_and(|k| k.name == ErrorCode::TransactionalIdNotFound.kafka_name())
}

// ---------------------------------------------------------------------------------------------
// abort.

/// The marker `abort` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
}

/// The producer whose open transaction on the partition starts at `start_offset`.
pub fn marker_for_start_offset(
    producers: &[ProducerState],
    start_offset: i64,
) -> Option<AbortMarker> {
    let p = producers
        .iter()
        .find(|p| p.current_txn_start_offset >= 0 && p.current_txn_start_offset == start_offset)?;
    Some(AbortMarker {
        producer_id: p.producer_id,
        // DescribeProducers widens the epoch to an int32; a producer epoch is an int16.
        producer_epoch: i16::try_from(p.producer_epoch).unwrap_or(i16::MAX),
        coordinator_epoch: p.coordinator_epoch.max(0),
    })
}

/// Writes an ABORT marker for the transaction `args` names to the partition's leader.
pub fn abort(cluster: &mut Cluster, args: &AbortArgs) -> anyhow::Result<AbortMarker> {
    let (topic, partition) = (args.topic.as_str(), args.partition);
    let leader = leader_of(cluster, topic, partition)?;
    let marker = match (args.start_offset, args.producer_id) {
        (Some(start_offset), _) => {
            let producers =
                describe_producers(cluster, leader, topic, partition).with_context(|| {
                    format!("Failed to validate producer state for partition {topic}-{partition}")
                })?;
            let Some(marker) = marker_for_start_offset(&producers, start_offset) else {
                bail!(
                    "Could not find any open transactions starting at offset {start_offset} \
                     on partition {topic}-{partition}"
                );
            };
            marker
        }
        (None, Some(producer_id)) => AbortMarker {
            producer_id,
            producer_epoch: args
                .producer_epoch
                .context("Missing required argument --producer-epoch")?,
            // A transaction that hung before its producer's first marker reports -1; 0 is
            // no greater than any epoch a coordinator has used.
            coordinator_epoch: args
                .coordinator_epoch
                .context("Missing required argument --coordinator-epoch")?
                .max(0),
        },
        (None, None) => bail!(
            "The transaction to abort must be identified either with --start-offset or with \
             --producer-id, --producer-epoch, and --coordinator-epoch"
        ),
    };
    write_abort_marker(cluster, leader, topic, partition, marker).with_context(|| {
        format!(
            "Failed to abort transaction of producer {} (epoch {}, coordinator epoch {}) on \
             {topic}-{partition}",
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
        )
    })?;
    Ok(marker)
}

fn write_abort_marker(
    cluster: &mut Cluster,
    leader: i32,
    topic: &str,
    partition: i32,
    marker: AbortMarker,
) -> anyhow::Result<()> {
    let client = cluster.node(leader)?;
    let version = client.version(ApiKey::WriteTxnMarkers, 0, 1)?;
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: marker.producer_id,
            producer_epoch: marker.producer_epoch,
            // false: ABORT.
            transaction_result: false,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.to_owned(),
                partition_indexes: vec![partition],
                ..Default::default()
            }],
            coordinator_epoch: marker.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp: WriteTxnMarkersResponse =
        client.request(ApiKey::WriteTxnMarkers, version, &request)?;
    let code = resp
        .markers
        .iter()
        .filter(|m| m.producer_id == marker.producer_id)
        .flat_map(|m| &m.topics)
        .filter(|t| t.name == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
        .map(|p| p.error_code)
        .with_context(|| format!("WriteTxnMarkers answered nothing for {topic}-{partition}"))?;
    if code != 0 {
        return Err(kafka_error(format!("{topic}-{partition}"), code, None).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;
    use wire::generated::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};

    fn producer(id: i64, start: i64, last_timestamp: i64) -> ProducerState {
        ProducerState {
            producer_id: id,
            producer_epoch: 3,
            last_sequence: 2,
            last_timestamp,
            coordinator_epoch: -1,
            current_txn_start_offset: start,
            ..Default::default()
        }
    }

    #[test]
    fn tables_pad_each_column_to_its_widest_cell_then_a_tab() {
        let table = list_table(&[
            Listed {
                transactional_id: "a-rather-long-transactional-id".to_owned(),
                coordinator: 1,
                producer_id: 7,
                state: "Ongoing".to_owned(),
            },
            Listed {
                transactional_id: "t".to_owned(),
                coordinator: 12,
                producer_id: 1000,
                state: "CompleteCommit".to_owned(),
            },
        ]);
        assert_eq!(
            table.render(),
            "TransactionalId               \tCoordinator\tProducerId\tTransactionState\t\n\
             a-rather-long-transactional-id\t1          \t7         \tOngoing         \t\n\
             t                             \t12         \t1000      \tCompleteCommit  \t\n"
        );
        assert_eq!(
            table.json_lines()[1],
            json!({"TransactionalId": "t", "Coordinator": 12, "ProducerId": 1000,
                   "TransactionState": "CompleteCommit"})
        );
        // No rows: the header alone, as Kafka prints it.
        assert_eq!(
            list_table(&[]).render(),
            "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
        );
    }

    #[test]
    fn producers_without_an_open_transaction_print_none() {
        let table = producers_table(&[producer(5, -1, 100), producer(6, 0, 200)]);
        let text = table.render();
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split('\t').map(str::trim).collect())
            .collect();
        assert_eq!(lines[0][..6], PRODUCER_COLUMNS);
        assert_eq!(lines[1][..6], ["5", "3", "-1", "2", "100", "None"]);
        assert_eq!(lines[2][..6], ["6", "3", "-1", "2", "200", "0"]);
        assert_eq!(
            table.json_lines()[0]["CurrentTransactionStartOffset"],
            Value::Null
        );
    }

    #[test]
    fn describe_shows_start_time_duration_and_partitions() {
        let mut d = Described {
            coordinator_id: 1,
            transactional_id: "tx".to_owned(),
            producer_id: 9,
            producer_epoch: 0,
            state: "Ongoing".to_owned(),
            transaction_timeout_ms: 60_000,
            transaction_start_time_ms: 1_000,
            topic_partitions: [("b".to_owned(), 0), ("a".to_owned(), 2)]
                .into_iter()
                .collect(),
        };
        let row = &describe_table(&d, 4_500).json_lines()[0];
        assert_eq!(row["CurrentTransactionStartTimeMs"], json!(1_000));
        assert_eq!(row["TransactionDurationMs"], json!(3_500));
        assert_eq!(row["TopicPartitions"], json!("a-2,b-0"));
        d.transaction_start_time_ms = -1;
        d.topic_partitions.clear();
        let text = describe_table(&d, 4_500).render();
        let cells: Vec<&str> = text
            .lines()
            .nth(1)
            .unwrap()
            .split('\t')
            .map(str::trim)
            .collect();
        assert_eq!(
            cells,
            ["1", "tx", "9", "0", "Ongoing", "60000", "None", "None", "", ""]
        );
    }

    #[test]
    fn candidates_are_open_transactions_older_than_the_timeout() {
        let now = 100 * MS_PER_MINUTE;
        let timeout = 15 * MS_PER_MINUTE;
        let mut producers = BTreeMap::new();
        producers.insert(
            ("t".to_owned(), 0),
            vec![
                producer(1, 10, now - timeout - 1), // open and old: candidate
                producer(2, 10, now - timeout),     // exactly the timeout: not yet
                producer(3, -1, 0),                 // nothing open
                producer(4, 0, now - 60 * MS_PER_MINUTE), // open and old: candidate
            ],
        );
        let found: Vec<i64> = candidates(&producers, timeout, now)
            .iter()
            .map(|o| o.producer.producer_id)
            .collect();
        assert_eq!(found, [1, 4]);
    }

    #[test]
    fn hanging_unless_the_coordinator_still_tracks_the_partition() {
        let open = |id: i64, partition: i32| OpenTransaction {
            topic: "t".to_owned(),
            partition,
            producer: producer(id, 0, 0),
        };
        let described = |id: i64, partitions: &[i32]| Described {
            producer_id: id,
            state: "Ongoing".to_owned(),
            topic_partitions: partitions.iter().map(|p| ("t".to_owned(), *p)).collect(),
            ..Default::default()
        };
        let candidates = vec![
            open(1, 0), // no transactional id for the producer: hanging
            open(2, 0), // coordinator forgot the id: hanging
            open(3, 0), // tracked on this partition: not hanging
            open(3, 1), // same producer, partition not in the transaction: hanging
            open(4, 0), // the id now belongs to another producer: hanging
        ];
        let ids: BTreeMap<i64, String> = [(2, "b"), (3, "c"), (4, "d")]
            .into_iter()
            .map(|(p, id)| (p, id.to_owned()))
            .collect();
        let descriptions: BTreeMap<String, Option<Described>> = [
            ("b".to_owned(), None),
            ("c".to_owned(), Some(described(3, &[0]))),
            ("d".to_owned(), Some(described(99, &[0]))),
        ]
        .into_iter()
        .collect();
        let hanging: Vec<(i64, i32)> = filter_hanging(candidates, &ids, &descriptions)
            .iter()
            .map(|o| (o.producer.producer_id, o.partition))
            .collect();
        assert_eq!(hanging, [(1, 0), (2, 0), (3, 1), (4, 0)]);
    }

    #[test]
    fn hanging_rows_show_minutes_since_the_last_write() {
        let now = 40 * MS_PER_MINUTE + 59_999;
        let h = OpenTransaction {
            topic: "t".to_owned(),
            partition: 2,
            producer: producer(8, 17, 10 * MS_PER_MINUTE),
        };
        let row = &hanging_table(&[h], now).json_lines()[0];
        assert_eq!(row["Duration(min)"], json!(30));
        assert_eq!(row["StartOffset"], json!(17));
        assert_eq!(row["CoordinatorEpoch"], json!(-1));
    }

    #[test]
    fn search_follows_replicas_of_the_broker_or_leaders() {
        let part = |index: i32, leader: i32, replicas: &[i32]| MetadataResponsePartition {
            partition_index: index,
            leader_id: leader,
            replica_nodes: replicas.to_vec(),
            ..Default::default()
        };
        let md = MetadataResponse {
            topics: vec![
                MetadataResponseTopic {
                    name: Some("a".to_owned()),
                    partitions: vec![part(0, 1, &[1, 2]), part(1, 2, &[2, 3])],
                    ..Default::default()
                },
                MetadataResponseTopic {
                    name: Some("b".to_owned()),
                    partitions: vec![part(0, 3, &[3, 1])],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let search = |broker_id, topic: Option<&str>, partition| Search {
            broker_id,
            topic: topic.map(str::to_owned),
            partition,
            max_transaction_timeout_ms: 0,
        };
        let keys = |found: Vec<((String, i32), i32)>| -> Vec<(String, i32, i32)> {
            found.into_iter().map(|((t, p), n)| (t, p, n)).collect()
        };
        assert_eq!(
            keys(partitions_to_search(&md, &search(Some(1), None, None))),
            [("a".to_owned(), 0, 1), ("b".to_owned(), 0, 1)]
        );
        assert_eq!(
            keys(partitions_to_search(&md, &search(None, Some("a"), None))),
            [("a".to_owned(), 0, 1), ("a".to_owned(), 1, 2)]
        );
        assert_eq!(
            keys(partitions_to_search(
                &md,
                &search(Some(2), Some("a"), Some(1))
            )),
            [("a".to_owned(), 1, 2)]
        );
    }

    #[test]
    fn abort_finds_the_producer_by_start_offset() {
        let mut p = producer(11, 40, 0);
        p.coordinator_epoch = -1;
        let producers = [producer(10, -1, 0), p, producer(12, 41, 0)];
        assert_eq!(
            marker_for_start_offset(&producers, 40),
            Some(AbortMarker {
                producer_id: 11,
                producer_epoch: 3,
                coordinator_epoch: 0,
            })
        );
        assert_eq!(marker_for_start_offset(&producers, -1), None);
        assert_eq!(marker_for_start_offset(&producers, 7), None);
    }

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: TransactionsCommand,
    }

    #[test]
    fn abort_takes_a_start_offset_or_the_whole_producer() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["t", "abort", "--bootstrap-server", "h:1", "--topic", "x"];
            argv.extend_from_slice(&["--partition", "0"]);
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).map(|c| c.command)
        };
        assert!(parse(&["--start-offset", "5"]).is_ok());
        let explicit = parse(&[
            "--producer-id",
            "4",
            "--producer-epoch",
            "1",
            "--coordinator-epoch",
            "-1",
        ]);
        let Ok(TransactionsCommand::Abort(args)) = explicit else {
            panic!("explicit form refused: {explicit:?}");
        };
        assert_eq!(args.coordinator_epoch, Some(-1));
        assert!(parse(&[]).is_err());
        assert!(parse(&["--producer-id", "4"]).is_err());
        assert!(parse(&["--start-offset", "5", "--producer-id", "4"]).is_err());
        // find-hanging needs a broker or a topic to bound its search.
        assert!(Cli::try_parse_from(["t", "find-hanging", "--bootstrap-server", "h:1"]).is_err());
    }
}
