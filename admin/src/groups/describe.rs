//! `groups describe`'s questions: the group's state and members from its coordinator
//! (ConsumerGroupDescribe, else DescribeGroups) and, per partition, its committed offset, log
//! end offset and owner.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::bail;
use wire::generated::api::ApiKey;
use wire::generated::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DescribeGroupsRequest,
    DescribeGroupsResponse,
};

use super::committed_offsets;
use crate::client::Client;
use crate::consumer_protocol::decode_assignment;
use crate::routing::{kafka_error, leaders, Cluster, LATEST};

/// Kafka's GROUP_ID_NOT_FOUND: ConsumerGroupDescribe's answer for a classic group.
const GROUP_ID_NOT_FOUND: i16 = 69;

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

/// Kafka's notes on stderr about the group's state; false when the group does not exist.
pub(super) fn note_state(info: &GroupInfo, err: &mut dyn Write) -> anyhow::Result<bool> {
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
