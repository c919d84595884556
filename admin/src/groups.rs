//! `broker groups list|describe|reset-offsets --bootstrap-server HOST:PORT`: what Kafka's
//! `kafka-consumer-groups.sh` does, over the Kafka protocol.
//!
//! `list` asks every broker (ListGroups); `describe` asks the group's coordinator
//! (FindCoordinator) for the group (ConsumerGroupDescribe for KIP-848 groups, DescribeGroups
//! for classic ones) and its committed offsets (OffsetFetch), and each partition's leader for
//! its log end offset (ListOffsets); `reset-offsets` computes new offsets as Kafka's scenarios
//! do, prints them, and with `--execute` commits them (OffsetCommit as an admin: no member,
//! generation -1), only while the group has no members, as Kafka refuses otherwise.
//!
//! The command line and its dispatch live here; `list`, `describe` (the group and its offsets
//! per partition), `describe_tables` (what `describe` prints), `committed` (OffsetFetch and
//! OffsetCommit of a group's offsets) and `reset` (reset-offsets) hold the rest.

mod committed;
mod describe;
mod describe_tables;
mod list;
mod reset;

use std::io::Write;

use anyhow::bail;

pub use committed::{commit_offsets, committed_offsets};
use describe::note_state;
pub use describe::{describe, offset_rows, GroupInfo, MemberInfo, OffsetRow};
pub use describe_tables::{print_members, print_offsets, print_state, OFFSET_COLUMNS};
pub use list::{list, print_list, Listed};
use reset::reset_offsets;
pub use reset::{new_offset, print_plan, ResetArgs, Scenario};

use super::group_delete;
use super::routing::Cluster;
use super::CommonArgs;

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

#[cfg(test)]
mod tests;
