//! What `groups describe` prints: Kafka's offsets table (the default), `--members` table and
//! `--state` table, or one JSON object per row.

use std::io::Write;

use serde_json::json;

use super::{GroupInfo, MemberInfo, OffsetRow, MIN_COLUMN};

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
