//! `bench fetch-cost`'s output: the Markdown tables and the bar figure.

use std::path::Path;

use anyhow::Result;

use super::{FetchCostReport, PathKind, MIB};
use crate::compare::fmt_num;

pub(super) fn met_text(met: Option<bool>, bound: &str) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "not met",
        None if bound == "none" => "-",
        None => "not measured",
    }
}

/// The three Markdown tables: paths, limits, targets.
pub fn markdown(r: &FetchCostReport) -> String {
    let mut md = format!(
        "## bench fetch-cost: {} MiB of {} B records, {} partition(s), median of {} round(s)\n\n",
        fmt_num(Some(r.bytes as f64 / MIB)),
        r.record_size,
        r.partitions,
        r.rounds
    );
    md.push_str(&format!("- Machine: {}\n", r.machine));
    md.push_str(&format!("- Date: {}\n", r.date));
    md.push_str(&format!("- Broker: {}\n", r.broker));
    md.push_str(&format!("- kTLS: {}\n\n", r.ktls));
    md.push_str("| path | broker CPU (s/GiB) | throughput (MiB/s) | CPU vs zero-copy | throughput vs zero-copy | broker cores | client CPU (s/GiB) | notes |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for p in &r.paths {
        let mut notes = Vec::new();
        if let Some(t) = &p.tls {
            notes.push(t.clone());
        }
        if let Some(c) = &p.broker_fetch_path {
            notes.push(c.clone());
        }
        if !p.note.is_empty() {
            notes.push(
                if p.skipped && !p.note.starts_with("failed") && !p.note.starts_with("unavailable")
                {
                    format!("skipped: {}", p.note)
                } else {
                    p.note.clone()
                },
            );
        }
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p.label,
            fmt_num(p.broker_cpu_s_per_gib),
            fmt_num(p.mib_per_sec),
            crate::compare::fmt_ratio(p.cpu_ratio),
            crate::compare::fmt_ratio(p.throughput_ratio),
            fmt_num(p.broker_cores),
            fmt_num(p.client_cpu_s_per_gib),
            notes.join("; ").replace('|', "/")
        ));
    }
    let l = &r.limits;
    md.push_str("\n| limit (same run) | value | unit |\n|---|---:|---|\n");
    let rows: [(&str, Option<f64>, &str); 10] = [
        (
            "bare sendfile loop, sender CPU (page cache -> loopback)",
            Some(l.sendfile_cpu_s_per_gib),
            "s/GiB",
        ),
        (
            "bare sendfile loop throughput",
            Some(l.sendfile_mib_s),
            "MiB/s",
        ),
        (
            "loopback TCP throughput (memory -> socket -> memory)",
            Some(l.tcp_loopback_mib_s),
            "MiB/s",
        ),
        (
            "loopback TCP sender CPU",
            Some(l.tcp_send_cpu_s_per_gib),
            "s/GiB",
        ),
        (
            "loopback TCP receiver CPU",
            Some(l.tcp_recv_cpu_s_per_gib),
            "s/GiB",
        ),
        (
            "AES-128-GCM seal, ring, 16 KiB records (the TLS path's cipher)",
            Some(l.ring_aes128gcm_cpu_s_per_gib),
            "s/GiB",
        ),
        (
            "AES-128-GCM seal, ring, 16 KiB records, 1 core",
            Some(l.ring_aes128gcm_mib_s),
            "MiB/s",
        ),
        (
            "AES-128-GCM `openssl speed -evp`, 16 KiB, 1 core",
            l.openssl_aes128gcm_mib_s,
            "MiB/s",
        ),
        (
            "AES-128-GCM seal, RustCrypto aes-gcm, 64 KiB (not the TLS path's)",
            Some(l.rustcrypto_aes128gcm_cpu_s_per_gib),
            "s/GiB",
        ),
        (
            "AES-128-GCM seal, RustCrypto aes-gcm, 64 KiB, 1 core",
            Some(l.rustcrypto_aes128gcm_mib_s),
            "MiB/s",
        ),
    ];
    for (name, v, unit) in rows {
        md.push_str(&format!("| {name} | {} | {unit} |\n", fmt_num(v)));
    }
    md.push_str("\n| target | bound | measured | result |\n|---|---|---|---|\n");
    for t in &r.targets {
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            t.name,
            t.bound,
            t.measured.replace('|', "/"),
            met_text(t.met, &t.bound)
        ));
    }
    md.push_str("\nBroker CPU: utime + stime of the broker process (`/proc/<pid>/stat`, all threads) over the consume window only, per GiB (2^30 B) of record payload; throughput in MiB/s of payload; the native consumer (over TLS: rustls + ring, AES-128-GCM suites only). Ratios are to plaintext zero-copy.\n");
    md
}

pub(super) fn draw(path: &Path, r: &FetchCostReport) -> Result<()> {
    let bars: Vec<crate::plot::Bar> = r
        .paths
        .iter()
        .map(|p| crate::plot::Bar {
            name: p.label.clone(),
            value: p.broker_cpu_s_per_gib,
        })
        .collect();
    let l = &r.limits;
    let mut cpu_lines = vec![
        ("bare sendfile loop".to_string(), l.sendfile_cpu_s_per_gib),
        (
            "1.15 x sendfile (zero-copy target)".to_string(),
            1.15 * l.sendfile_cpu_s_per_gib,
        ),
    ];
    if let Some(z) = r
        .paths
        .iter()
        .find(|p| p.path == PathKind::Zerocopy)
        .and_then(|p| p.broker_cpu_s_per_gib)
    {
        cpu_lines.push((
            "zero-copy + 1.25 x AES-128-GCM (TLS target)".to_string(),
            z + 1.25 * l.ring_aes128gcm_cpu_s_per_gib,
        ));
    }
    let tput: Vec<crate::plot::Bar> = r
        .paths
        .iter()
        .map(|p| crate::plot::Bar {
            name: p.label.clone(),
            value: p.mib_per_sec,
        })
        .collect();
    let tput_lines = vec![
        ("loopback TCP".to_string(), l.tcp_loopback_mib_s),
        (
            "60 % of loopback (target)".to_string(),
            0.6 * l.tcp_loopback_mib_s,
        ),
    ];
    crate::plot::draw_bars(
        path,
        &format!(
            "fetch cost per path ({} MiB, {} B records)",
            fmt_num(Some(r.bytes as f64 / MIB)),
            r.record_size
        ),
        &crate::plot::BarPanel {
            caption: "broker CPU per GiB fetched".into(),
            unit: "s/GiB".into(),
            bars,
            lines: cpu_lines,
        },
        &crate::plot::BarPanel {
            caption: "fetch throughput".into(),
            unit: "MiB/s".into(),
            bars: tput,
            lines: tput_lines,
        },
    )
}
