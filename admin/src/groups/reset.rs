//! `groups reset-offsets`: new committed offsets for an inactive group by one of Kafka's
//! scenarios, printed, exported as a plan or (with `--execute`) committed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;

use super::{commit_offsets, describe, parse_topic_partitions, TopicSpec, MIN_COLUMN};
use crate::client::Client;
use crate::group_time::{parse_datetime, parse_duration};
use crate::reset_plan;
use crate::routing::{kafka_error, leaders, Cluster, EARLIEST, LATEST};
use crate::CommonArgs;

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

pub(super) fn reset_offsets(
    args: &ResetArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
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
