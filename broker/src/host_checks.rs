//! The host checks of the `tuning` crate, run read-only at start-up: each setting that falls
//! short is logged on one line (a warning when it costs throughput or latency), so a badly set up machine is visible in the first lines.

use std::path::Path;

use tuning::CpuSet;

/// `shard_count` shards on `cpus` cores, placed as `server::run` places them (id % cpus).
pub fn log_shortfalls(data_dir: &Path, shard_count: usize, cpus: usize) {
    let cores = CpuSet::from_cpus((0..shard_count).map(|id| id % cpus.max(1)));
    let findings = tuning::startup_findings(data_dir, Some(cores));
    let short: Vec<_> = findings
        .iter()
        .filter(|f| f.severity.falls_short())
        .collect();
    for finding in &short {
        let line = format!(
            "host tuning: {} is {}, wanted {}: {}",
            finding.check, finding.current, finding.wanted, finding.reason
        );
        let severity = finding.severity.as_str();
        // Only what costs throughput or latency is a warning; "info" findings (the last few
        // percent, or only some deployments) stay at info so the first lines are not noise.
        if finding.severity >= tuning::finding::Severity::Warning {
            tracing::warn!(severity, "{line}");
        } else {
            tracing::info!(severity, "{line}");
        }
    }
    tracing::info!(
        short = short.len(),
        checks = findings.len(),
        "host tuning checked (`broker tune check` for the table, `broker tune apply` for fixes)"
    );
}
