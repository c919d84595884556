//! Prometheus text exposition format 0.0.4: `# HELP` and `# TYPE` once per family, then its
//! samples, each `name{label="value",...} value`. Every family's samples are written
//! together (the format requires it), so callers write one family at a time.
//!
//! Runs on the scrape thread only; the output grows with the series written (bounded by the
//! caller's series caps, see `render`).

use std::fmt::Write;

use super::histogram::{HistogramSnapshot, BUCKET_BOUNDS_US};

/// Content type of the format (Prometheus' `text/plain; version=0.0.4`).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// The text of one scrape being written.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family: its help text (one line) and type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(valid_name(name), "metric name {name}");
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of an integer value.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.labels(name, labels, None);
        let _ = writeln!(self.out, " {value}");
    }

    /// One sample of a signed value (offsets, lag).
    pub fn sample_i64(&mut self, name: &str, labels: &[(&str, &str)], value: i64) {
        self.labels(name, labels, None);
        let _ = writeln!(self.out, " {value}");
    }

    /// One sample of a real value (seconds).
    pub fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.labels(name, labels, None);
        let _ = writeln!(self.out, " {}", format_f64(value));
    }

    /// The `_bucket`, `_sum` and `_count` samples of one histogram of microseconds, exported
    /// in seconds (Prometheus' base unit).
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        histogram: &HistogramSnapshot,
    ) {
        let bucket_name = format!("{name}_bucket");
        let cumulative = histogram.cumulative();
        for (i, count) in cumulative.iter().enumerate() {
            let le = match BUCKET_BOUNDS_US.get(i) {
                Some(&us) => format_f64(us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            self.labels(&bucket_name, labels, Some(&le));
            let _ = writeln!(self.out, " {count}");
        }
        self.sample_f64(
            &format!("{name}_sum"),
            labels,
            histogram.sum_us as f64 / 1e6,
        );
        self.sample(&format!("{name}_count"), labels, histogram.count());
    }

    fn labels(&mut self, name: &str, labels: &[(&str, &str)], le: Option<&str>) {
        self.out.push_str(name);
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let mut first = true;
        let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
        for (label, value) in all {
            if !first {
                self.out.push(',');
            }
            first = false;
            self.out.push_str(label);
            self.out.push_str("=\"");
            escape_label_value(&mut self.out, value);
            self.out.push('"');
        }
        self.out.push('}');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Label values may hold any UTF-8; the format escapes backslash, double quote and newline.
fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn format_f64(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        // Rust's shortest round-trip form, never in exponent notation.
        format!("{value}")
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the format's metric name syntax.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::histogram::Histogram;
    use std::time::Duration;

    #[test]
    fn families_samples_and_escaping() {
        let mut text = Exposition::new();
        text.family("broker_requests_total", Kind::Counter, "Requests.\nread");
        text.sample(
            "broker_requests_total",
            &[("shard", "0"), ("api", "Produce")],
            7,
        );
        text.sample("broker_requests_total", &[], 1);
        text.family("broker_log_size_bytes", Kind::Gauge, "Size.");
        text.sample_i64("broker_log_size_bytes", &[("topic", "a\"b\\c\nd")], -1);
        let out = text.finish();
        assert_eq!(
            out,
            "# HELP broker_requests_total Requests.\\nread\n\
             # TYPE broker_requests_total counter\n\
             broker_requests_total{shard=\"0\",api=\"Produce\"} 7\n\
             broker_requests_total 1\n\
             # HELP broker_log_size_bytes Size.\n\
             # TYPE broker_log_size_bytes gauge\n\
             broker_log_size_bytes{topic=\"a\\\"b\\\\c\\nd\"} -1\n"
        );
    }

    #[test]
    fn histogram_in_seconds_with_cumulative_buckets() {
        let histogram = Histogram::default();
        histogram.record(Duration::from_micros(40));
        histogram.record(Duration::from_micros(2_000));
        histogram.record(Duration::from_secs(11));
        let mut text = Exposition::new();
        text.family("lat_seconds", Kind::Histogram, "Latency.");
        text.histogram("lat_seconds", &[("api", "Fetch")], &histogram.snapshot());
        let out = text.finish();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[2],
            "lat_seconds_bucket{api=\"Fetch\",le=\"0.00005\"} 1"
        );
        assert_eq!(
            lines[3],
            "lat_seconds_bucket{api=\"Fetch\",le=\"0.0001\"} 1"
        );
        assert_eq!(
            lines[7],
            "lat_seconds_bucket{api=\"Fetch\",le=\"0.0025\"} 2"
        );
        assert_eq!(lines[18], "lat_seconds_bucket{api=\"Fetch\",le=\"10\"} 2");
        assert_eq!(lines[19], "lat_seconds_bucket{api=\"Fetch\",le=\"+Inf\"} 3");
        assert_eq!(lines[20], "lat_seconds_sum{api=\"Fetch\"} 11.00204");
        assert_eq!(lines[21], "lat_seconds_count{api=\"Fetch\"} 3");
        assert_eq!(lines.len(), 22);
    }

    #[test]
    fn metric_name_syntax() {
        assert!(valid_name("broker_requests_total"));
        assert!(valid_name("a:b"));
        assert!(!valid_name("1abc"));
        assert!(!valid_name("a-b"));
        assert!(!valid_name(""));
    }
}
