//! `bench latency-sweep`'s output: the Markdown tables and the figure.

use std::path::Path;

use anyhow::Result;

use super::{Point, SweepMode, SweepReport};

/// A cell: `n/a` for None or non-finite, else `decimals` decimals.
pub fn cell(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "n/a".into(),
    }
}

/// The header of the points table.
pub const HEADER: &str = "| target | mode | rate (records/s) | achieved (records/s) | p50 (ms) | p99 (ms) | p99.9 (ms) | broker CPU (µs/request) | broker CPU (µs/record) | requests/s | records/request |";

/// The Markdown tables: points (one row each, in run order), then idle CPU.
pub fn markdown(report: &SweepReport) -> String {
    let mut out = format!("## {}\n\n", report.title);
    out.push_str(&format!(
        "{} client, {} B records, {} partition(s), {} connection(s) per produce point, {} s per point, {}; {}.\n\n",
        report.client,
        report.record_size,
        report.partitions,
        report.connections,
        report.duration_s,
        if report.single_record_requests {
            "one record per request (linger.ms=0)"
        } else {
            "client batching allowed (linger.ms=0)"
        },
        report.date
    ));
    for t in &report.targets {
        out.push_str(&format!(
            "- **{}** ({:?}) at {}, pid {}{}\n",
            t.name,
            t.kind,
            t.bootstrap,
            t.pid
                .map_or("n/a (in-process or not found)".to_string(), |p| p
                    .to_string()),
            if t.config.is_empty() {
                String::new()
            } else {
                format!(", keys: `{}`", t.config.join(" "))
            }
        ));
    }
    out.push('\n');
    out.push_str(HEADER);
    out.push_str("\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for p in &report.points {
        let mode = p.mode.map_or("", SweepMode::name);
        if p.skipped {
            out.push_str(&format!(
                "| {} | {} | {:.0} | {} |  |  |  |  |  |  |  |\n",
                p.target,
                mode,
                p.rate,
                p.note.replace('|', "/")
            ));
            continue;
        }
        out.push_str(&format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p.target,
            mode,
            p.rate,
            cell(p.achieved_rate, 0),
            cell(p.p50_ms, 3),
            cell(p.p99_ms, 3),
            cell(p.p99_9_ms, 3),
            cell(p.broker_cpu_us_per_request, 1),
            cell(p.broker_cpu_us_per_record, 1),
            cell(p.requests_per_s, 0),
            cell(p.records_per_request, 2),
        ));
    }
    let notes: Vec<String> = report
        .points
        .iter()
        .filter(|p| !p.skipped && !p.note.is_empty())
        .map(|p| {
            format!(
                "- {} {} at {:.0}/s: {}",
                p.target,
                p.mode.map_or("", SweepMode::name),
                p.rate,
                p.note
            )
        })
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    if !report.idle.is_empty() {
        out.push_str("\n| target | idle CPU (% of a core) | seconds |\n|---|---:|---:|\n");
        for i in &report.idle {
            out.push_str(&format!(
                "| {} | {} | {:.1} |\n",
                i.target,
                cell(Some(i.percent_of_core), 2),
                i.seconds
            ));
        }
    }
    out
}

/// The figure: p99 and broker CPU per request against the offered rate, a line per
/// target and mode.
pub fn plot(report: &SweepReport, path: &Path) -> Result<()> {
    let mut p99 = Vec::new();
    let mut cpu_lines = Vec::new();
    for t in &report.targets {
        for mode in [SweepMode::Acks1, SweepMode::AcksAll, SweepMode::E2e] {
            let points: Vec<&Point> = report
                .points
                .iter()
                .filter(|p| p.target == t.name && p.mode == Some(mode) && !p.skipped)
                .collect();
            if points.is_empty() {
                continue;
            }
            let name = format!("{} {}", t.name, mode.name());
            let line = |f: fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
                points
                    .iter()
                    .filter_map(|p| Some((p.rate, f(p)?)))
                    .collect()
            };
            p99.push((name.clone(), line(|p| p.p99_ms)));
            // e2e too (its broker CPU includes the Fetch side), so that a line has the
            // same colour in both panels.
            cpu_lines.push((name, line(|p| p.broker_cpu_us_per_request)));
        }
    }
    crate::plot::draw_lines(
        path,
        &report.title,
        &crate::plot::LinePanel {
            caption: "latency p99".into(),
            x_desc: "offered records/s".into(),
            y_desc: "p99 (ms)".into(),
            log_y: true,
            lines: p99,
        },
        &crate::plot::LinePanel {
            caption: "broker CPU per Produce request (e2e: with its Fetch side)".into(),
            x_desc: "offered records/s".into(),
            y_desc: "µs/request".into(),
            log_y: true,
            lines: cpu_lines,
        },
    )
}
