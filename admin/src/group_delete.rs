//! `broker groups delete` and `broker groups delete-offsets`: kafka-consumer-groups.sh's
//! `--delete` (DeleteGroups, to each group's coordinator) and `--delete-offsets` (OffsetDelete),
//! with its messages. A group the broker refuses (NON_EMPTY_GROUP while members are active,
//! GROUP_ID_NOT_FOUND) is reported by Kafka's error name and makes the command fail.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::bail;
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use wire::generated::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};

use super::client::{error_message, error_name};
use super::groups::TopicSpec;
use super::routing::{leaders, Cluster};

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION: a `--topic` the cluster does not have.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// One group's answer to DeleteGroups: `None` when it was deleted, else its error code.
pub type GroupResult = (String, Option<i16>);

/// Deletes each group at its coordinator; every group is tried, whatever the others answer.
pub fn delete_groups(cluster: &mut Cluster, groups: &[String]) -> anyhow::Result<Vec<GroupResult>> {
    let mut results = Vec::with_capacity(groups.len());
    for group in groups {
        let (_, client) = cluster.coordinator(group)?;
        let version = client.version(ApiKey::DeleteGroups, 0, i16::MAX)?;
        let request = DeleteGroupsRequest {
            groups_names: vec![group.clone()],
            ..Default::default()
        };
        let resp: DeleteGroupsResponse = client.request(ApiKey::DeleteGroups, version, &request)?;
        let Some(r) = resp.results.iter().find(|r| &r.group_id == group) else {
            bail!("DeleteGroups answered nothing for group {group}");
        };
        results.push((group.clone(), (r.error_code != 0).then_some(r.error_code)));
    }
    Ok(results)
}

/// `'a', 'b'`, as Kafka quotes group lists.
fn quoted(groups: &[&str]) -> String {
    groups
        .iter()
        .map(|g| format!("'{g}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Kafka's `--delete` report; fails when any group could not be deleted.
pub fn print_deleted(
    results: &[GroupResult],
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let deleted: Vec<&str> = results
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(g, _)| g.as_str())
        .collect();
    let failed: Vec<(&str, i16)> = results
        .iter()
        .filter_map(|(g, e)| e.map(|e| (g.as_str(), e)))
        .collect();
    if json {
        for (group, error) in results {
            writeln!(
                out,
                "{}",
                json!({
                    "group": group,
                    "deleted": error.is_none(),
                    "error": error.map(error_name),
                    "message": error.map(error_message),
                })
            )?;
        }
    } else if failed.is_empty() {
        writeln!(
            out,
            "Deletion of requested consumer groups ({}) was successful.",
            quoted(&deleted)
        )?;
    } else {
        writeln!(out, "\nError: Deletion of some consumer groups failed:")?;
        for (group, code) in &failed {
            writeln!(
                out,
                "* Group '{group}' could not be deleted due to: {}: {}",
                error_name(*code),
                error_message(*code)
            )?;
        }
        if !deleted.is_empty() {
            writeln!(
                out,
                "\nThese consumer groups were deleted successfully: {}",
                quoted(&deleted)
            )?;
        }
    }
    if let Some((group, code)) = failed.first() {
        bail!(
            "{} of {} group(s) could not be deleted (group {group}: {})",
            failed.len(),
            results.len(),
            error_name(*code)
        );
    }
    Ok(())
}

/// What OffsetDelete answered: the group-level error and each partition's (partition -1: a
/// topic that does not exist, as Kafka's "Not Provided").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetsDeleted {
    pub error: Option<i16>,
    pub partitions: BTreeMap<(String, i32), Option<i16>>,
}

/// Deletes `group`'s committed offsets of the partitions `topics` name (every partition of a
/// topic given without partitions).
pub fn delete_offsets(
    cluster: &mut Cluster,
    group: &str,
    topics: &[TopicSpec],
) -> anyhow::Result<OffsetsDeleted> {
    let mut result = OffsetsDeleted::default();
    let mut wanted: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let whole: Vec<String> = topics
        .iter()
        .filter(|t| t.partitions.is_empty())
        .map(|t| t.topic.clone())
        .collect();
    let md = if whole.is_empty() {
        None
    } else {
        Some(cluster.metadata(Some(&whole))?)
    };
    for spec in topics {
        let parts = wanted.entry(spec.topic.clone()).or_default();
        if !spec.partitions.is_empty() {
            parts.extend(&spec.partitions);
            continue;
        }
        match md.as_ref().map(|md| leaders(md, &spec.topic)) {
            Some(Ok(all)) => parts.extend(all.into_iter().map(|(p, _)| p)),
            _ => {
                result
                    .partitions
                    .insert((spec.topic.clone(), -1), Some(UNKNOWN_TOPIC_OR_PARTITION));
            }
        }
    }
    wanted.retain(|_, parts| {
        parts.sort_unstable();
        parts.dedup();
        !parts.is_empty()
    });
    if wanted.is_empty() {
        return Ok(result);
    }
    let (_, client) = cluster.coordinator(group)?;
    let version = client.version(ApiKey::OffsetDelete, 0, i16::MAX)?;
    let request = OffsetDeleteRequest {
        group_id: group.to_owned(),
        topics: wanted
            .iter()
            .map(|(name, parts)| OffsetDeleteRequestTopic {
                name: name.clone(),
                partitions: parts
                    .iter()
                    .map(|&p| OffsetDeleteRequestPartition {
                        partition_index: p,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let resp: OffsetDeleteResponse = client.request(ApiKey::OffsetDelete, version, &request)?;
    if resp.error_code != 0 {
        result.error = Some(resp.error_code);
        // A group-level refusal answers no partitions: each fails with the group's error.
        for (topic, parts) in &wanted {
            for &p in parts {
                result
                    .partitions
                    .insert((topic.clone(), p), Some(resp.error_code));
            }
        }
        return Ok(result);
    }
    for t in resp.topics {
        for p in t.partitions {
            result.partitions.insert(
                (t.name.clone(), p.partition_index),
                (p.error_code != 0).then_some(p.error_code),
            );
        }
    }
    Ok(result)
}

/// Kafka's `--delete-offsets` report: a line on the outcome, then TOPIC PARTITION STATUS;
/// fails when the group or any partition failed.
pub fn print_offsets_deleted(
    group: &str,
    topics: &[TopicSpec],
    result: &OffsetsDeleted,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let failed = result.partitions.values().filter(|e| e.is_some()).count();
    if json {
        for ((topic, p), error) in &result.partitions {
            writeln!(
                out,
                "{}",
                json!({
                    "group": group,
                    "topic": topic,
                    "partition": (*p >= 0).then_some(*p),
                    "error": error.map(error_name),
                    "message": error.map(error_message),
                })
            )?;
        }
    } else {
        // The `--topic` arguments as given, as Kafka echoes them.
        let names: Vec<String> = topics
            .iter()
            .map(|t| match t.partitions.as_slice() {
                [] => t.topic.clone(),
                parts => {
                    let parts: Vec<String> = parts.iter().map(i32::to_string).collect();
                    format!("{}:{}", t.topic, parts.join(","))
                }
            })
            .collect();
        match result.error.map(error_name).as_deref() {
            None if failed == 0 => writeln!(
                out,
                "Request succeed for deleting offsets with topic {} group {group}",
                names.join(", ")
            )?,
            None => writeln!(
                out,
                "\nError: Encounter some partition level error, see the follow-up details:"
            )?,
            Some("GROUP_ID_NOT_FOUND") => writeln!(out, "\nError: '{group}' does not exist.")?,
            Some("INVALID_GROUP_ID") => writeln!(out, "\nError: '{group}' is not valid.")?,
            Some("NON_EMPTY_GROUP") => writeln!(
                out,
                "\nError: Deleting offsets of a consumer group '{group}' is forbidden if the \
                 group is not empty."
            )?,
            Some(other) => writeln!(out, "\nError: Encounter some unknown error: {other}")?,
        }
        writeln!(
            out,
            "\n{:<30} {:<15} {:<15}",
            "TOPIC", "PARTITION", "STATUS"
        )?;
        for ((topic, p), error) in &result.partitions {
            let partition = if *p >= 0 {
                p.to_string()
            } else {
                "Not Provided".to_owned()
            };
            let status = match error {
                None => "Successful".to_owned(),
                Some(code) => format!("Error: {}: {}", error_name(*code), error_message(*code)),
            };
            writeln!(
                out,
                "{}",
                format!("{topic:<30} {partition:<15} {status:<15}").trim_end()
            )?;
        }
    }
    if let Some(code) = result.error {
        bail!("offsets of group {group} not deleted: {}", error_name(code));
    }
    if failed > 0 {
        bail!("{failed} partition(s) of group {group} failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>) -> anyhow::Result<()>) -> (String, bool) {
        let mut out = Vec::new();
        let ok = f(&mut out).is_ok();
        (String::from_utf8(out).unwrap(), ok)
    }

    #[test]
    fn deleted_groups_are_reported_as_kafka_does() {
        let ok = [("a".to_owned(), None), ("b".to_owned(), None)];
        let (out, success) = text(|o| print_deleted(&ok, false, o));
        assert!(success);
        assert_eq!(
            out,
            "Deletion of requested consumer groups ('a', 'b') was successful.\n"
        );
        let mixed = [("a".to_owned(), None), ("busy".to_owned(), Some(68))];
        let (out, success) = text(|o| print_deleted(&mixed, false, o));
        assert!(!success);
        assert!(
            out.contains("Deletion of some consumer groups failed:"),
            "{out}"
        );
        assert!(
            out.contains("* Group 'busy' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty."),
            "{out}"
        );
        assert!(out.contains("deleted successfully: 'a'"), "{out}");
        let (out, _) = text(|o| print_deleted(&mixed, true, o));
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["error"], "NON_EMPTY_GROUP");
        assert_eq!(lines[0]["deleted"], true);
    }

    #[test]
    fn deleted_offsets_table_and_errors() {
        let topics = [TopicSpec {
            topic: "t".into(),
            partitions: vec![],
        }];
        let mut result = OffsetsDeleted::default();
        result.partitions.insert(("t".into(), 0), None);
        result.partitions.insert(("t".into(), 1), None);
        let (out, success) = text(|o| print_offsets_deleted("g", &topics, &result, false, o));
        assert!(success);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "Request succeed for deleting offsets with topic t group g"
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["TOPIC", "PARTITION", "STATUS"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["t", "0", "Successful"]
        );

        result.error = Some(68);
        result
            .partitions
            .insert(("gone".into(), -1), Some(UNKNOWN_TOPIC_OR_PARTITION));
        let (out, success) = text(|o| print_offsets_deleted("g", &topics, &result, false, o));
        assert!(!success);
        assert!(out.contains("forbidden if the group is not empty"), "{out}");
        assert!(out.contains("Not Provided"), "{out}");
        assert!(out.contains("Error: UNKNOWN_TOPIC_OR_PARTITION"), "{out}");
    }
}
