//! `groups list`: every group of every broker (ListGroups), printed as Kafka's `--list` does.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::{ListGroupsRequest, ListGroupsResponse};

use super::MIN_COLUMN;
use crate::routing::{kafka_error, Cluster};

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
