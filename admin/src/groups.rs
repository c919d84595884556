//! `broker groups list|describe|reset-offsets --bootstrap-server HOST:PORT`: what Kafka's
//! `kafka-consumer-groups.sh` does, over the Kafka protocol.
//!
//! `list` asks every broker (ListGroups); `describe` asks the group's coordinator
//! (FindCoordinator) for the group (ConsumerGroupDescribe for KIP-848 groups, DescribeGroups
//! for classic ones) and its committed offsets (OffsetFetch), and each partition's leader for
//! its log end offset (ListOffsets); `reset-offsets` computes new offsets as Kafka's scenarios
//! do, prints them, and with `--execute` commits them (OffsetCommit as an admin: no member,
//! generation -1), only while the group has no members, as Kafka refuses otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use wire::generated::offset_fetch_request::OffsetFetchRequestGroup;
use wire::generated::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};

use super::client::Client;
use super::consumer_protocol::decode_assignment;
use super::group_delete;
use super::group_time::{parse_datetime, parse_duration};
use super::reset_plan;
use super::routing::{kafka_error, leaders, Cluster, EARLIEST, LATEST};
use super::CommonArgs;

/// OffsetFetch v2 is the first where a null topic list means "every committed offset".
const OFFSET_FETCH_MIN_VERSION: i16 = 2;
/// OffsetCommit v2 is the first without the v1 per-partition timestamp and with retention.
const OFFSET_COMMIT_MIN_VERSION: i16 = 2;
/// Kafka's GROUP_ID_NOT_FOUND: ConsumerGroupDescribe's answer for a classic group.
const GROUP_ID_NOT_FOUND: i16 = 69;
/// The narrowest column kafka-consumer-groups.sh prints for names and ids.
const MIN_COLUMN: usize = 15;

/// `broker groups ...`, with kafka-consumer-groups.sh's flags.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum GroupsCommand {
    /// Lists consumer groups (with --state / --type: their state / type, optionally only
    /// those in the comma-separated states or types given).
    List {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "STATES")]
        state: Option<String>,
        #[arg(long = "type", num_args = 0..=1, default_missing_value = "", value_name = "TYPES")]
        group_type: Option<String>,
    },
    /// Describes a group: per partition its committed offset, log end offset, lag and owner
    /// (default), its members (--members) or its state (--state).
    Describe {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        group: String,
        #[arg(long, conflicts_with = "state")]
        members: bool,
        #[arg(long)]
        state: bool,
        /// With --members: each member's assignment too.
        #[arg(long)]
        verbose: bool,
    },
    /// Computes (and with --execute commits) new committed offsets for an inactive group.
    ResetOffsets(ResetArgs),
    /// Deletes groups with their committed offsets; a group with active members is refused
    /// (kafka-consumer-groups.sh --delete).
    Delete {
        #[command(flatten)]
        common: CommonArgs,
        /// A group to delete; repeatable.
        #[arg(long, required_unless_present = "all_groups")]
        group: Vec<String>,
        /// Every group of the cluster.
        #[arg(long, conflicts_with = "group")]
        all_groups: bool,
    },
    /// Deletes a group's committed offsets of some topics or partitions
    /// (kafka-consumer-groups.sh --delete-offsets).
    DeleteOffsets {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        group: String,
        /// TOPIC or TOPIC:0,1,2; repeatable.
        #[arg(long, required = true, value_parser = parse_topic_partitions)]
        topic: Vec<TopicSpec>,
    },
}

/// `groups reset-offsets`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("scope").args(["topic", "all_topics"])))]
#[command(group(clap::ArgGroup::new("scenario").required(true)
    .args(["to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime", "by_duration",
           "to_current", "from_file"])))]
pub struct ResetArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long)]
    pub group: String,
    /// TOPIC or TOPIC:0,1,2; repeatable.
    #[arg(long, value_parser = parse_topic_partitions)]
    pub topic: Vec<TopicSpec>,
    /// Every topic the group has committed offsets for.
    #[arg(long)]
    pub all_topics: bool,
    #[arg(long)]
    pub to_earliest: bool,
    #[arg(long)]
    pub to_latest: bool,
    #[arg(long, allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// Moves each committed offset by N (negative: back).
    #[arg(long, allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// The first offset at or after this time: YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm].
    #[arg(long)]
    pub to_datetime: Option<String>,
    /// The first offset at or after now minus this duration: PnDTnHnMnS.
    #[arg(long)]
    pub by_duration: Option<String>,
    /// The committed offset (the log end offset where none is committed).
    #[arg(long)]
    pub to_current: bool,
    /// The offsets of a CSV plan (`topic,partition,offset` lines, as --export prints), which
    /// also names the partitions: no --topic or --all-topics needed.
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<std::path::PathBuf>,
    /// Print the new offsets as CSV (`topic,partition,offset`) for a later --from-file.
    #[arg(long)]
    pub export: bool,
    /// Only print the new offsets (the default).
    #[arg(long, conflicts_with = "execute")]
    pub dry_run: bool,
    /// Commit the new offsets.
    #[arg(long)]
    pub execute: bool,
}

/// A `--topic` argument: a topic and, optionally, some of its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub topic: String,
    /// Empty: every partition.
    pub partitions: Vec<i32>,
}

/// Parses `TOPIC` or `TOPIC:0,1,2` (kafka-consumer-groups.sh's `--topic`).
pub fn parse_topic_partitions(text: &str) -> Result<TopicSpec, String> {
    let (topic, parts) = match text.split_once(':') {
        Some((t, p)) => (t, Some(p)),
        None => (text, None),
    };
    if topic.is_empty() {
        return Err(format!("no topic in {text:?}"));
    }
    let partitions = match parts {
        None => Vec::new(),
        Some(p) => p
            .split(',')
            .map(|n| {
                n.trim()
                    .parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("bad partition {n:?} in {text:?}"))
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(TopicSpec {
        topic: topic.to_owned(),
        partitions,
    })
}

impl GroupsCommand {
    /// Runs the command: tables or JSON lines to `out`, Kafka's notes about the group's
    /// state to `err`.
    pub fn run(self, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            GroupsCommand::List {
                common,
                state,
                group_type,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let groups = list(&mut cluster)?;
                print_list(
                    &groups,
                    state.as_deref(),
                    group_type.as_deref(),
                    common.json,
                    out,
                )
            }
            GroupsCommand::Describe {
                common,
                group,
                members,
                state,
                verbose,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let info = describe(&mut cluster, &group)?;
                if !note_state(&info, err)? {
                    bail!("Consumer group '{group}' does not exist.");
                }
                if state {
                    print_state(&info, common.json, out)
                } else if members {
                    print_members(&info, verbose, common.json, out)
                } else {
                    let rows = offset_rows(&mut cluster, &info)?;
                    print_offsets(&group, &rows, common.json, out)
                }
            }
            GroupsCommand::ResetOffsets(args) => reset_offsets(&args, out, err),
            GroupsCommand::Delete {
                common,
                group,
                all_groups,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let groups = if all_groups {
                    list(&mut cluster)?
                        .into_iter()
                        .map(|g| g.group_id)
                        .collect()
                } else {
                    group
                };
                let results = group_delete::delete_groups(&mut cluster, &groups)?;
                group_delete::print_deleted(&results, common.json, out)
            }
            GroupsCommand::DeleteOffsets {
                common,
                group,
                topic,
            } => {
                let mut cluster = Cluster::connect(&common.bootstrap_server)?;
                let result = group_delete::delete_offsets(&mut cluster, &group, &topic)?;
                group_delete::print_offsets_deleted(&group, &topic, &result, common.json, out)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// list

/// One group as ListGroups names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub group_id: String,
    pub protocol_type: String,
    /// Empty where the broker's ListGroups is older than v4.
    pub state: String,
    /// Empty where the broker's ListGroups is older than v5.
    pub group_type: String,
    pub coordinator: i32,
}

/// Every group of every broker, by group id.
pub fn list(cluster: &mut Cluster) -> anyhow::Result<Vec<Listed>> {
    cluster.metadata(Some(&[]))?;
    let mut groups: BTreeMap<String, Listed> = BTreeMap::new();
    for node in cluster.node_ids() {
        let client = cluster.node(node)?;
        let version = client.version(ApiKey::ListGroups, 0, i16::MAX)?;
        let resp: ListGroupsResponse =
            client.request(ApiKey::ListGroups, version, &ListGroupsRequest::default())?;
        if resp.error_code != 0 {
            return Err(kafka_error(
                format!("ListGroups of broker {node}"),
                resp.error_code,
                None,
            )
            .into());
        }
        for g in resp.groups {
            groups.insert(
                g.group_id.clone(),
                Listed {
                    group_id: g.group_id,
                    protocol_type: g.protocol_type,
                    state: g.group_state,
                    group_type: g.group_type,
                    coordinator: node,
                },
            );
        }
    }
    Ok(groups.into_values().collect())
}

/// Whether `value` is among the comma-separated, case-insensitive `filter` (empty: all).
fn matches(filter: Option<&str>, value: &str) -> bool {
    match filter {
        None | Some("") => true,
        Some(f) => f.split(',').any(|x| x.trim().eq_ignore_ascii_case(value)),
    }
}

/// Kafka's `--list` output: names; with --state/--type, columns of state and type.
pub fn print_list(
    groups: &[Listed],
    state: Option<&str>,
    group_type: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "Unknown".to_owned()
        } else {
            s.to_owned()
        }
    };
    // A group's type: the broker's (v5), else "classic" as Kafka's tool assumes.
    let type_of = |g: &Listed| {
        if g.group_type.is_empty() {
            "Classic".to_owned()
        } else {
            let mut t = g.group_type.clone();
            if let Some(first) = t.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            t
        }
    };
    let shown: Vec<&Listed> = groups
        .iter()
        .filter(|g| matches(state, &g.state) && matches(group_type, &type_of(g)))
        .collect();
    if json {
        for g in shown {
            writeln!(
                out,
                "{}",
                json!({
                    "group": g.group_id,
                    "state": or_unknown(&g.state),
                    "type": type_of(g),
                    "protocol_type": g.protocol_type,
                    "coordinator": g.coordinator,
                })
            )?;
        }
        return Ok(());
    }
    if state.is_none() && group_type.is_none() {
        for g in shown {
            writeln!(out, "{}", g.group_id)?;
        }
        return Ok(());
    }
    let width = shown
        .iter()
        .map(|g| g.group_id.len())
        .max()
        .unwrap_or(0)
        .max(MIN_COLUMN);
    let mut header = format!("{:<width$}", "GROUP");
    if group_type.is_some() {
        header.push_str(&format!(" {:<MIN_COLUMN$}", "TYPE"));
    }
    if state.is_some() {
        header.push_str(" STATE");
    }
    writeln!(out, "{}", header.trim_end())?;
    for g in shown {
        let mut line = format!("{:<width$}", g.group_id);
        if group_type.is_some() {
            line.push_str(&format!(" {:<MIN_COLUMN$}", type_of(g)));
        }
        if state.is_some() {
            line.push_str(&format!(" {}", or_unknown(&g.state)));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// describe

/// One member of a group and the partitions it owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberInfo {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// What describing a group found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub group_id: String,
    pub state: String,
    /// "consumer" (KIP-848) or "classic".
    pub group_type: String,
    pub protocol_type: String,
    pub assignment_strategy: String,
    pub coordinator_id: i32,
    pub coordinator: String,
    pub members: Vec<MemberInfo>,
    /// Committed offsets by topic and partition.
    pub committed: BTreeMap<(String, i32), i64>,
}

/// Asks the coordinator of `group` for its state, members and committed offsets.
pub fn describe(cluster: &mut Cluster, group: &str) -> anyhow::Result<GroupInfo> {
    let (node, client) = cluster.coordinator(group)?;
    let mut info = describe_consumer_group(client, group)?
        .map_or_else(|| describe_classic_group(client, group), Ok)?;
    info.committed = committed_offsets(client, group)?;
    info.coordinator_id = node;
    info.coordinator = cluster.address(node).unwrap_or("?").to_owned();
    Ok(info)
}

/// ConsumerGroupDescribe (KIP-848), or `None` when the broker lacks it or the group is a
/// classic one.
fn describe_consumer_group(client: &mut Client, group: &str) -> anyhow::Result<Option<GroupInfo>> {
    let Ok(version) = client.version(ApiKey::ConsumerGroupDescribe, 0, i16::MAX) else {
        return Ok(None);
    };
    let request = ConsumerGroupDescribeRequest {
        group_ids: vec![group.to_owned()],
        ..Default::default()
    };
    let resp: ConsumerGroupDescribeResponse =
        client.request(ApiKey::ConsumerGroupDescribe, version, &request)?;
    let Some(g) = resp.groups.into_iter().find(|g| g.group_id == group) else {
        return Ok(None);
    };
    if g.error_code == GROUP_ID_NOT_FOUND {
        return Ok(None);
    }
    if g.error_code != 0 {
        return Err(kafka_error(
            format!("group {group}"),
            g.error_code,
            g.error_message.as_deref(),
        )
        .into());
    }
    Ok(Some(GroupInfo {
        group_id: g.group_id,
        state: g.group_state,
        group_type: "consumer".to_owned(),
        protocol_type: "consumer".to_owned(),
        assignment_strategy: g.assignor_name,
        members: g
            .members
            .into_iter()
            .map(|m| MemberInfo {
                member_id: m.member_id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                host: m.client_host,
                assignment: m
                    .assignment
                    .topic_partitions
                    .into_iter()
                    .map(|tp| (tp.topic_name, tp.partitions))
                    .collect(),
            })
            .collect(),
        ..Default::default()
    }))
}

fn describe_classic_group(client: &mut Client, group: &str) -> anyhow::Result<GroupInfo> {
    let version = client.version(ApiKey::DescribeGroups, 0, i16::MAX)?;
    let request = DescribeGroupsRequest {
        groups: vec![group.to_owned()],
        ..Default::default()
    };
    let resp: DescribeGroupsResponse = client.request(ApiKey::DescribeGroups, version, &request)?;
    let Some(g) = resp.groups.into_iter().find(|g| g.group_id == group) else {
        bail!("DescribeGroups answered nothing for group {group}");
    };
    if g.error_code == GROUP_ID_NOT_FOUND {
        return Ok(GroupInfo {
            group_id: group.to_owned(),
            state: "Dead".to_owned(),
            group_type: "classic".to_owned(),
            ..Default::default()
        });
    }
    if g.error_code != 0 {
        return Err(kafka_error(format!("group {group}"), g.error_code, None).into());
    }
    let consumer = g.protocol_type == "consumer" || g.protocol_type.is_empty();
    Ok(GroupInfo {
        group_id: g.group_id,
        state: g.group_state,
        group_type: "classic".to_owned(),
        protocol_type: g.protocol_type,
        assignment_strategy: g.protocol_data,
        members: g
            .members
            .into_iter()
            .map(|m| MemberInfo {
                assignment: if consumer {
                    decode_assignment(&m.member_assignment).unwrap_or_default()
                } else {
                    Vec::new()
                },
                member_id: m.member_id,
                instance_id: m.group_instance_id,
                client_id: m.client_id,
                host: m.client_host,
            })
            .collect(),
        ..Default::default()
    })
}

/// Every offset `group` committed (OffsetFetch with all topics).
pub fn committed_offsets(
    client: &mut Client,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let version = client.version(ApiKey::OffsetFetch, OFFSET_FETCH_MIN_VERSION, i16::MAX)?;
    // v8 (KIP-709) asks for groups in a batch.
    let request = if version >= 8 {
        OffsetFetchRequest {
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.to_owned(),
                member_id: None,
                member_epoch: -1,
                topics: None,
                ..Default::default()
            }],
            ..Default::default()
        }
    } else {
        OffsetFetchRequest {
            group_id: group.to_owned(),
            topics: None,
            ..Default::default()
        }
    };
    let resp: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, version, &request)?;
    let mut committed = BTreeMap::new();
    let check = |code: i16, what: String| -> anyhow::Result<()> {
        if code != 0 {
            return Err(kafka_error(what, code, None).into());
        }
        Ok(())
    };
    if version >= 8 {
        let Some(g) = resp.groups.iter().find(|g| g.group_id == group) else {
            bail!("OffsetFetch answered nothing for group {group}");
        };
        check(g.error_code, format!("group {group}"))?;
        for t in &g.topics {
            for p in &t.partitions {
                check(p.error_code, format!("{}-{}", t.name, p.partition_index))?;
                if p.committed_offset >= 0 {
                    committed.insert((t.name.clone(), p.partition_index), p.committed_offset);
                }
            }
        }
    } else {
        check(resp.error_code, format!("group {group}"))?;
        for t in &resp.topics {
            for p in &t.partitions {
                check(p.error_code, format!("{}-{}", t.name, p.partition_index))?;
                if p.committed_offset >= 0 {
                    committed.insert((t.name.clone(), p.partition_index), p.committed_offset);
                }
            }
        }
    }
    Ok(committed)
}

/// Kafka's notes on stderr about the group's state; false when the group does not exist.
fn note_state(info: &GroupInfo, err: &mut dyn Write) -> anyhow::Result<bool> {
    let group = &info.group_id;
    match info.state.as_str() {
        "Dead" => return Ok(false),
        "Empty" => writeln!(err, "\nConsumer group '{group}' has no active members.")?,
        "PreparingRebalance" | "CompletingRebalance" | "Assigning" | "Reconciling" => {
            writeln!(err, "\nWarning: Consumer group '{group}' is rebalancing.")?
        }
        _ => {}
    }
    Ok(true)
}

/// One row of `describe`'s offsets table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetRow {
    pub topic: String,
    pub partition: i32,
    pub current: Option<i64>,
    pub log_end: Option<i64>,
    pub member: Option<MemberInfo>,
}

impl OffsetRow {
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end? - self.current?)
    }
}

/// Rows for every partition the group owns or has committed, with each one's log end offset.
pub fn offset_rows(cluster: &mut Cluster, info: &GroupInfo) -> anyhow::Result<Vec<OffsetRow>> {
    let mut owner: BTreeMap<(String, i32), &MemberInfo> = BTreeMap::new();
    for m in &info.members {
        for (topic, parts) in &m.assignment {
            for &p in parts {
                owner.insert((topic.clone(), p), m);
            }
        }
    }
    let keys: BTreeSet<(String, i32)> =
        owner.keys().chain(info.committed.keys()).cloned().collect();
    let topics: Vec<String> = keys
        .iter()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut log_end: BTreeMap<(String, i32), i64> = BTreeMap::new();
    if !topics.is_empty() {
        let md = cluster.metadata(Some(&topics))?;
        for topic in &topics {
            // A deleted topic's committed offsets still show, without a log end offset.
            let Ok(parts) = leaders(&md, topic) else {
                continue;
            };
            let wanted: Vec<(i32, i32)> = parts
                .into_iter()
                .filter(|(p, _)| keys.contains(&(topic.clone(), *p)))
                .collect();
            for (p, offset) in cluster.list_offsets(topic, &wanted, LATEST)? {
                log_end.insert((topic.clone(), p), offset);
            }
        }
    }
    Ok(keys
        .into_iter()
        .map(|key| OffsetRow {
            current: info.committed.get(&key).copied(),
            log_end: log_end.get(&key).copied(),
            member: owner.get(&key).map(|m| (*m).clone()),
            topic: key.0,
            partition: key.1,
        })
        .collect())
}

fn dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The columns of kafka-consumer-groups.sh's `--describe` offsets table, in its order.
pub const OFFSET_COLUMNS: [&str; 9] = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
];

/// Kafka's offsets table: [`OFFSET_COLUMNS`].
pub fn print_offsets(
    group: &str,
    rows: &[OffsetRow],
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        for r in rows {
            let m = r.member.as_ref();
            writeln!(
                out,
                "{}",
                json!({
                    "group": group,
                    "topic": r.topic,
                    "partition": r.partition,
                    "current_offset": r.current,
                    "log_end_offset": r.log_end,
                    "lag": r.lag(),
                    "consumer_id": m.map(|m| &m.member_id),
                    "host": m.map(|m| &m.host),
                    "client_id": m.map(|m| &m.client_id),
                })
            )?;
        }
        return Ok(());
    }
    if rows.is_empty() {
        return Ok(());
    }
    let w = |f: &dyn Fn(&OffsetRow) -> usize| rows.iter().map(f).max().unwrap_or(0).max(MIN_COLUMN);
    let gw = group.len().max(MIN_COLUMN);
    let tw = w(&|r| r.topic.len());
    let cw = w(&|r| r.member.as_ref().map_or(1, |m| m.member_id.len()));
    let hw = w(&|r| r.member.as_ref().map_or(1, |m| m.host.len()));
    let [group_h, topic_h, partition_h, current_h, log_end_h, lag_h, consumer_h, host_h, client_h] =
        OFFSET_COLUMNS;
    writeln!(out)?;
    writeln!(
        out,
        "{group_h:<gw$} {topic_h:<tw$} {partition_h:<10} {current_h:<15} {log_end_h:<15} \
         {lag_h:<15} {consumer_h:<cw$} {host_h:<hw$} {client_h}",
    )?;
    for r in rows {
        let m = r.member.as_ref();
        writeln!(
            out,
            "{:<gw$} {:<tw$} {:<10} {:<15} {:<15} {:<15} {:<cw$} {:<hw$} {}",
            group,
            r.topic,
            r.partition,
            dash(r.current),
            dash(r.log_end),
            dash(r.lag()),
            dash(m.map(|m| &m.member_id)),
            dash(m.map(|m| &m.host)),
            dash(m.map(|m| &m.client_id)),
        )?;
    }
    Ok(())
}

fn assignment_text(m: &MemberInfo) -> String {
    if m.assignment.is_empty() {
        return "-".to_owned();
    }
    m.assignment
        .iter()
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}({})", ps.join(","))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Kafka's `--members` table: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS [ASSIGNMENT].
pub fn print_members(
    info: &GroupInfo,
    verbose: bool,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let count = |m: &MemberInfo| m.assignment.iter().map(|(_, p)| p.len()).sum::<usize>();
    if json {
        for m in &info.members {
            writeln!(
                out,
                "{}",
                json!({
                    "group": info.group_id,
                    "consumer_id": m.member_id,
                    "group_instance_id": m.instance_id,
                    "host": m.host,
                    "client_id": m.client_id,
                    "partitions": count(m),
                    "assignment": m.assignment.iter()
                        .map(|(t, p)| json!({ "topic": t, "partitions": p }))
                        .collect::<Vec<_>>(),
                })
            )?;
        }
        return Ok(());
    }
    if info.members.is_empty() {
        return Ok(());
    }
    let w = |f: &dyn Fn(&MemberInfo) -> usize| {
        info.members
            .iter()
            .map(f)
            .max()
            .unwrap_or(0)
            .max(MIN_COLUMN)
    };
    let gw = info.group_id.len().max(MIN_COLUMN);
    let cw = w(&|m| m.member_id.len());
    let hw = w(&|m| m.host.len());
    let lw = w(&|m| m.client_id.len());
    writeln!(out)?;
    let mut header = format!(
        "{:<gw$} {:<cw$} {:<hw$} {:<lw$} {:<12}",
        "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"
    );
    if verbose {
        header.push_str(" ASSIGNMENT");
    }
    writeln!(out, "{}", header.trim_end())?;
    for m in &info.members {
        let mut line = format!(
            "{:<gw$} {:<cw$} {:<hw$} {:<lw$} {:<12}",
            info.group_id,
            m.member_id,
            m.host,
            m.client_id,
            count(m)
        );
        if verbose {
            line.push(' ');
            line.push_str(&assignment_text(m));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Kafka's `--state` table: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS.
pub fn print_state(info: &GroupInfo, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(
            out,
            "{}",
            json!({
                "group": info.group_id,
                "coordinator": info.coordinator,
                "coordinator_id": info.coordinator_id,
                "assignment_strategy": info.assignment_strategy,
                "state": info.state,
                "type": info.group_type,
                "members": info.members.len(),
            })
        )?;
        return Ok(());
    }
    let coordinator = format!("{}  ({})", info.coordinator, info.coordinator_id);
    let gw = info.group_id.len().max(MIN_COLUMN);
    let cw = coordinator.len().max(25);
    writeln!(out)?;
    writeln!(
        out,
        "{:<gw$} {:<cw$} {:<20} {:<20} #MEMBERS",
        "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"
    )?;
    writeln!(
        out,
        "{:<gw$} {:<cw$} {:<20} {:<20} {}",
        info.group_id,
        coordinator,
        if info.assignment_strategy.is_empty() {
            "-"
        } else {
            info.assignment_strategy.as_str()
        },
        info.state,
        info.members.len()
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// reset-offsets

/// How the new offsets are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Earliest,
    Latest,
    Offset(i64),
    ShiftBy(i64),
    /// The first offset at or after this time (ms).
    Time(i64),
    /// The committed offset, else the latest.
    Current,
    /// Each partition's own offset from a plan file, clamped as `Offset`.
    FromFile,
}

impl Scenario {
    fn from_args(args: &ResetArgs, now_ms: i64) -> anyhow::Result<Scenario> {
        Ok(if args.to_earliest {
            Scenario::Earliest
        } else if args.to_latest {
            Scenario::Latest
        } else if let Some(n) = args.to_offset {
            Scenario::Offset(n)
        } else if let Some(n) = args.shift_by {
            Scenario::ShiftBy(n)
        } else if let Some(t) = &args.to_datetime {
            Scenario::Time(parse_datetime(t)?)
        } else if let Some(d) = &args.by_duration {
            Scenario::Time(now_ms - parse_duration(d)?)
        } else if args.to_current {
            Scenario::Current
        } else if args.from_file.is_some() {
            Scenario::FromFile
        } else {
            bail!("one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --by-duration, --to-current, --from-file is required")
        })
    }
}

/// The offset `scenario` picks for one partition, clamped to `[earliest, latest]` as Kafka
/// does; `by_time` is ListOffsets' answer for the scenario's time (-1: none that late).
pub fn new_offset(
    scenario: Scenario,
    what: &str,
    earliest: i64,
    latest: i64,
    committed: Option<i64>,
    by_time: Option<i64>,
) -> anyhow::Result<i64> {
    let clamp = |n: i64| n.clamp(earliest, latest.max(earliest));
    Ok(match scenario {
        Scenario::Earliest => earliest,
        Scenario::Latest => latest,
        Scenario::Offset(n) => clamp(n),
        Scenario::ShiftBy(n) => match committed {
            Some(c) => clamp(c.saturating_add(n)),
            None => bail!(
                "Cannot shift offset for partition {what} since there is no current committed offset"
            ),
        },
        Scenario::Time(_) => match by_time {
            Some(o) if o >= 0 => clamp(o),
            _ => latest,
        },
        Scenario::Current => committed.unwrap_or(latest),
        Scenario::FromFile => bail!("no offset planned for partition {what}"),
    })
}

fn reset_offsets(args: &ResetArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<()> {
    let group = &args.group;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let scenario = Scenario::from_args(args, now_ms)?;
    if !args.execute && !args.dry_run {
        writeln!(
            err,
            "WARN: No action will be performed as the --execute option is missing. In a \
             future major release, the default behavior of this command will be to prompt the \
             user before executing the reset rather than doing a dry run. You should add the \
             --dry-run option explicitly if you are scripting this command and want to keep the \
             current default behavior without prompting."
        )?;
    }
    let file_plan = match &args.from_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the reset plan {}", path.display()))?;
            let plan = reset_plan::parse(&text, group)?;
            if plan.is_empty() {
                bail!("No reset plan for group {group} found");
            }
            plan
        }
        None if args.topic.is_empty() && !args.all_topics => {
            bail!("One of the reset scopes should be defined: --all-topics, --topic.")
        }
        None => reset_plan::Plan::new(),
    };
    let mut cluster = Cluster::connect(&args.common.bootstrap_server)?;
    let info = describe(&mut cluster, group)?;
    if !matches!(info.state.as_str(), "Empty" | "Dead") {
        bail!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current \
             state is {}.",
            info.state
        );
    }
    // The partitions to reset, by topic: a plan file's, as Kafka takes them, whatever the
    // scope says.
    let mut wanted: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    if args.from_file.is_some() {
        for (topic, p) in file_plan.keys() {
            wanted.entry(topic.clone()).or_default().insert(*p);
        }
    } else {
        if args.all_topics {
            for (t, p) in info.committed.keys() {
                wanted.entry(t.clone()).or_default().insert(*p);
            }
        }
        for spec in &args.topic {
            let entry = wanted.entry(spec.topic.clone()).or_default();
            entry.extend(spec.partitions.iter().copied());
        }
    }
    let topics: Vec<String> = wanted.keys().cloned().collect();
    let mut plan: Vec<(String, i32, i64)> = Vec::new();
    if !topics.is_empty() {
        let md = cluster.metadata(Some(&topics))?;
        for (topic, parts) in &wanted {
            let all = leaders(&md, topic)?;
            let chosen: Vec<(i32, i32)> = if parts.is_empty() {
                all
            } else {
                for p in parts {
                    if !all.iter().any(|(q, _)| q == p) {
                        return Err(kafka_error(format!("{topic}-{p}"), 3, None).into());
                    }
                }
                all.into_iter().filter(|(p, _)| parts.contains(p)).collect()
            };
            let earliest = cluster.list_offsets(topic, &chosen, EARLIEST)?;
            let latest = cluster.list_offsets(topic, &chosen, LATEST)?;
            let by_time = match scenario {
                Scenario::Time(t) => Some(cluster.list_offsets(topic, &chosen, t)?),
                _ => None,
            };
            for &(p, _) in &chosen {
                let key = (topic.clone(), p);
                let scenario = match (scenario, file_plan.get(&key)) {
                    (Scenario::FromFile, Some(&planned)) => Scenario::Offset(planned),
                    (s, _) => s,
                };
                let offset = new_offset(
                    scenario,
                    &format!("{topic}-{p}"),
                    earliest[&p],
                    latest[&p],
                    info.committed.get(&(topic.clone(), p)).copied(),
                    by_time.as_ref().and_then(|m| m.get(&p).copied()),
                )?;
                plan.push((topic.clone(), p, offset));
            }
        }
    }
    if args.execute && !plan.is_empty() {
        let (_, client) = cluster.coordinator(group)?;
        commit(client, group, &plan)?;
    }
    if args.export {
        out.write_all(reset_plan::export(&plan).as_bytes())?;
        return Ok(());
    }
    print_plan(group, &plan, args.common.json, out)
}

fn commit(client: &mut Client, group: &str, plan: &[(String, i32, i64)]) -> anyhow::Result<()> {
    // An admin commit: no member, generation -1, which a group without members accepts.
    if let Some((topic, p, code)) = commit_offsets(client, group, -1, "", plan)? {
        return Err(kafka_error(format!("group {group}, {topic}-{p}"), code, None).into());
    }
    Ok(())
}

/// OffsetCommit of `plan` (topic, partition, offset) for `group` as member `member_id` of
/// `generation`; the first partition the coordinator refused, with its error code.
pub fn commit_offsets(
    client: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
    plan: &[(String, i32, i64)],
) -> anyhow::Result<Option<(String, i32, i16)>> {
    let version = client.version(ApiKey::OffsetCommit, OFFSET_COMMIT_MIN_VERSION, i16::MAX)?;
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (topic, p, offset) in plan {
        by_topic
            .entry(topic.as_str())
            .or_default()
            .push(OffsetCommitRequestPartition {
                partition_index: *p,
                committed_offset: *offset,
                committed_leader_epoch: -1,
                commit_timestamp: -1,
                committed_metadata: Some(String::new()),
                ..Default::default()
            });
    }
    let request = OffsetCommitRequest {
        group_id: group.to_owned(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: by_topic
            .into_iter()
            .map(|(name, partitions)| OffsetCommitRequestTopic {
                name: name.to_owned(),
                partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let resp: OffsetCommitResponse = client
        .request(ApiKey::OffsetCommit, version, &request)
        .with_context(|| format!("committing offsets of group {group}"))?;
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Ok(Some((t.name.clone(), p.partition_index, p.error_code)));
            }
        }
    }
    Ok(None)
}

/// Kafka's reset table: GROUP TOPIC PARTITION NEW-OFFSET.
pub fn print_plan(
    group: &str,
    plan: &[(String, i32, i64)],
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        for (topic, p, offset) in plan {
            writeln!(
                out,
                "{}",
                json!({ "group": group, "topic": topic, "partition": p, "new_offset": offset })
            )?;
        }
        return Ok(());
    }
    let gw = group.len().max(MIN_COLUMN);
    let tw = plan
        .iter()
        .map(|(t, _, _)| t.len())
        .max()
        .unwrap_or(0)
        .max(MIN_COLUMN);
    writeln!(out)?;
    writeln!(
        out,
        "{:<gw$} {:<tw$} {:<10} NEW-OFFSET",
        "GROUP", "TOPIC", "PARTITION"
    )?;
    for (topic, p, offset) in plan {
        writeln!(out, "{:<gw$} {:<tw$} {:<10} {}", group, topic, p, offset)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_arguments_as_kafkas() {
        assert_eq!(
            parse_topic_partitions("orders").unwrap(),
            TopicSpec {
                topic: "orders".into(),
                partitions: vec![]
            }
        );
        assert_eq!(
            parse_topic_partitions("orders:0,2").unwrap().partitions,
            vec![0, 2]
        );
        assert!(parse_topic_partitions("orders:x").is_err());
        assert!(parse_topic_partitions("orders:-1").is_err());
        assert!(parse_topic_partitions(":1").is_err());
    }

    #[test]
    fn new_offsets_follow_kafkas_scenarios_and_clamp() {
        let n = |s, c, t| new_offset(s, "t-0", 10, 100, c, t).unwrap();
        assert_eq!(n(Scenario::Earliest, None, None), 10);
        assert_eq!(n(Scenario::Latest, None, None), 100);
        assert_eq!(n(Scenario::Offset(50), None, None), 50);
        assert_eq!(n(Scenario::Offset(5), None, None), 10);
        assert_eq!(n(Scenario::Offset(500), None, None), 100);
        assert_eq!(n(Scenario::ShiftBy(-5), Some(40), None), 35);
        assert_eq!(n(Scenario::ShiftBy(-50), Some(40), None), 10);
        assert_eq!(n(Scenario::ShiftBy(500), Some(40), None), 100);
        assert_eq!(n(Scenario::Time(0), None, Some(42)), 42);
        assert_eq!(n(Scenario::Time(0), None, Some(-1)), 100);
        assert_eq!(n(Scenario::Current, Some(40), None), 40);
        assert_eq!(n(Scenario::Current, None, None), 100);
        assert!(new_offset(Scenario::FromFile, "t-0", 0, 9, None, None).is_err());
        let err = new_offset(Scenario::ShiftBy(1), "t-0", 0, 9, None, None).unwrap_err();
        assert!(err.to_string().contains("no current committed offset"));
    }

    fn listed(id: &str, state: &str, t: &str) -> Listed {
        Listed {
            group_id: id.into(),
            protocol_type: "consumer".into(),
            state: state.into(),
            group_type: t.into(),
            coordinator: 1,
        }
    }

    #[test]
    fn list_prints_names_or_columns() {
        let groups = [
            listed("a", "Stable", "classic"),
            listed("b", "Empty", "consumer"),
        ];
        let mut out = Vec::new();
        print_list(&groups, None, None, false, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\nb\n");
        let mut out = Vec::new();
        print_list(&groups, Some("empty"), None, false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GROUP           STATE\nb               Empty\n"
        );
        let mut out = Vec::new();
        print_list(&groups, Some(""), Some("Classic"), false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GROUP           TYPE            STATE\na               Classic         Stable\n"
        );
        let mut out = Vec::new();
        print_list(&groups, None, None, true, &mut out).unwrap();
        let first: serde_json::Value =
            serde_json::from_str(String::from_utf8(out).unwrap().lines().next().unwrap()).unwrap();
        assert_eq!(first["group"], "a");
        assert_eq!(first["state"], "Stable");
    }

    #[test]
    fn offsets_table_has_kafkas_columns_and_dashes() {
        let rows = vec![
            OffsetRow {
                topic: "orders".into(),
                partition: 0,
                current: Some(5),
                log_end: Some(12),
                member: None,
            },
            OffsetRow {
                topic: "orders".into(),
                partition: 1,
                current: None,
                log_end: Some(3),
                member: Some(MemberInfo {
                    member_id: "m-1".into(),
                    client_id: "c".into(),
                    host: "/127.0.0.1".into(),
                    ..Default::default()
                }),
            },
        ];
        let mut out = Vec::new();
        print_offsets("g", &rows, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], OFFSET_COLUMNS);
        assert_eq!(
            lines[1],
            ["g", "orders", "0", "5", "12", "7", "-", "-", "-"]
        );
        assert_eq!(
            lines[2],
            ["g", "orders", "1", "-", "3", "-", "m-1", "/127.0.0.1", "c"]
        );
    }
}
