//! The comparison's table: the metrics read from each run, the median of rounds, A/B ratios
//! and the markdown table `bench compare` prints and RESULTS.md holds.

use serde::{Deserialize, Serialize};

use crate::compare::{Metrics, Mode};

/// Median of the values present (None when none is).
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A metric row of the table: label and how to read it from a run.
pub struct MetricRow {
    pub key: &'static str,
    pub label: &'static str,
    pub get: fn(&Metrics) -> Option<f64>,
    /// Whether higher is better (for the reader; the ratio is always A/B).
    pub higher_is_better: bool,
}

/// Every metric of the comparison table, in order.
pub const METRICS: &[MetricRow] = &[
    MetricRow {
        key: "records_per_sec",
        label: "throughput (records/s)",
        get: |m| Some(m.records_per_sec),
        higher_is_better: true,
    },
    MetricRow {
        key: "mib_per_sec",
        label: "throughput (MiB/s)",
        get: |m| Some(m.mib_per_sec),
        higher_is_better: true,
    },
    MetricRow {
        key: "p50_ms",
        label: "latency p50 (ms)",
        get: |m| m.latency_ms.as_ref().map(|l| l.p50),
        higher_is_better: false,
    },
    MetricRow {
        key: "p99_ms",
        label: "latency p99 (ms)",
        get: |m| m.latency_ms.as_ref().map(|l| l.p99),
        higher_is_better: false,
    },
    MetricRow {
        key: "p99_9_ms",
        label: "latency p99.9 (ms)",
        get: |m| m.latency_ms.as_ref().map(|l| l.p99_9),
        higher_is_better: false,
    },
    MetricRow {
        key: "broker_cpu_s_per_gib",
        label: "broker CPU (s/GiB)",
        get: |m| m.broker_cpu_s_per_gib,
        higher_is_better: false,
    },
    MetricRow {
        key: "broker_cpu_us_per_record",
        label: "broker CPU (µs/record)",
        get: |m| m.broker_cpu_us_per_record,
        higher_is_better: false,
    },
    MetricRow {
        key: "client_cpu_s_per_gib",
        label: "client CPU (s/GiB)",
        get: |m| m.client_cpu_s_per_gib,
        higher_is_better: false,
    },
];

/// Medians of one side and of the other, and A/B, per metric.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub mode: Mode,
    pub rows: Vec<SummaryRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryRow {
    pub key: String,
    pub label: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// A / B of the medians.
    pub ratio: Option<f64>,
}

impl Summary {
    pub fn get(&self, key: &str) -> Option<&SummaryRow> {
        self.rows.iter().find(|r| r.key == key)
    }
}

pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

pub fn summarize(mode: Mode, a: &[Metrics], b: &[Metrics]) -> Summary {
    let rows = METRICS
        .iter()
        .map(|row| {
            let ma = median(a.iter().map(row.get));
            let mb = median(b.iter().map(row.get));
            SummaryRow {
                key: row.key.into(),
                label: row.label.into(),
                a: ma,
                b: mb,
                ratio: ratio(ma, mb),
            }
        })
        .collect();
    Summary { mode, rows }
}

/// A number for a table: 3 significant digits, thousands without exponent.
pub fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if !v.is_finite() => "n/a".into(),
        Some(v) => {
            let a = v.abs();
            if a >= 1000.0 {
                format!("{v:.0}")
            } else if a >= 100.0 {
                format!("{v:.1}")
            } else if a >= 10.0 {
                format!("{v:.2}")
            } else if a >= 1.0 {
                format!("{v:.3}")
            } else if a == 0.0 {
                "0".into()
            } else {
                format!("{v:.4}")
            }
        }
    }
}

pub fn fmt_ratio(v: Option<f64>) -> String {
    match v.filter(|v| v.is_finite()) {
        None => "n/a".into(),
        Some(0.0) => "0".into(),
        // Two decimals, or three significant digits below 0.1.
        Some(v) => {
            let decimals = if v.abs() < 0.1 {
                (2 - v.abs().log10().floor() as i32) as usize
            } else {
                2
            };
            format!("{v:.decimals$}")
        }
    }
}

/// The Markdown table of a summary.
pub fn markdown_table(summary: &Summary, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "| metric ({}) | {a_name} (median) | {b_name} (median) | {a_name}/{b_name} |\n",
        summary.mode.name()
    ));
    out.push_str("|---|---:|---:|---:|\n");
    for row in &summary.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.label,
            fmt_num(row.a),
            fmt_num(row.b),
            fmt_ratio(row.ratio)
        ));
    }
    out
}
