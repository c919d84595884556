//! `bench producer-perf`: Kafka's `kafka-producer-perf-test` (ProducerPerformance.java), over
//! either client engine.
//!
//! Output, as Kafka prints it (Java's number formats, see `output::java_fixed`):
//! - every `--reporting-interval` ms (5000, as Kafka's fixed window):
//!   `N records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.`
//! - at the end:
//!   `N records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency,
//!    %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.` (one line; percentiles truncated to
//!   whole ms as Java's int latencies are; avg and max come from microsecond latencies)
//! - then our own line, all at microsecond precision ([`extra_line`]):
//!   `%.3f ms 50th, %.3f ms 95th, %.3f ms 99th, %.3f ms 99.9th, %.3f ms 99.99th, %.3f ms max.`
//!
//! Differences from Kafka's tool, on purpose: latency runs from the record's *intended* send
//! time (`start + i / throughput`) to its delivery callback, so falling behind the schedule
//! counts; percentiles come from an hdrhistogram of every record (not a 500k sample); with
//! `--record-size` the payloads are 64 random `A-Z` payloads made up front and used in turn
//! (Kafka regenerates one per record); `--payload-delimiter` is a literal string, not a regex.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::histogram::{LatencyHistogram, LatencySummary};
use super::output::{java_f, java_fixed, mb, write_json, Timestamp};
use super::rate::{Pacer, SeriesPoint, ThroughputSeries};
use crate::engine::{self, ClientKind, Props, SendError};

/// Command-line arguments (Kafka's names, plus ours: --client, --json, --bootstrap-server,
/// --create-topic-partitions, --reporting-interval).
#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("payload").required(true).args(["record_size", "payload_file"])))]
pub struct ProducerArgs {
    /// Produce messages to this topic.
    #[arg(long)]
    pub topic: String,
    /// Number of messages to produce.
    #[arg(long = "num-records")]
    pub num_records: u64,
    /// Message size in bytes (exactly one of --record-size or --payload-file).
    #[arg(long = "record-size")]
    pub record_size: Option<usize>,
    /// File to read the message payloads from (UTF-8 text, split at --payload-delimiter).
    #[arg(long = "payload-file")]
    pub payload_file: Option<PathBuf>,
    /// Delimiter for --payload-file (a literal string; `\n`, the default, means newline).
    #[arg(long = "payload-delimiter", default_value = "\\n")]
    pub payload_delimiter: String,
    /// Throttle to approximately THROUGHPUT messages/sec; -1 disables throttling.
    #[arg(long, allow_negative_numbers = true)]
    pub throughput: f64,
    /// Producer properties (Kafka names), e.g. acks=all linger.ms=5 bootstrap.servers=HOST:PORT.
    #[arg(long = "producer-props", num_args = 1.., value_name = "PROP-NAME=PROP-VALUE")]
    pub producer_props: Vec<String>,
    /// Producer config properties file (--producer-props take precedence).
    #[arg(long = "producer.config", value_name = "CONFIG-FILE")]
    pub producer_config: Option<PathBuf>,
    /// Client engine.
    #[arg(long, value_enum, default_value_t = ClientKind::Librdkafka)]
    pub client: ClientKind,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Broker address (default: bootstrap.servers from the properties).
    #[arg(long = "bootstrap-server")]
    pub bootstrap_server: Option<String>,
    /// Create the topic first with this many partitions (an existing topic is kept).
    #[arg(long = "create-topic-partitions")]
    pub create_topic_partitions: Option<i32>,
    /// Milliseconds between progress lines (Kafka's tool: fixed 5000).
    #[arg(long = "reporting-interval", default_value_t = 5000)]
    pub reporting_interval_ms: u64,
}

/// Resolves the broker address: the flag, else `bootstrap.servers` in `props`.
pub fn resolve_bootstrap(flag: &Option<String>, props: &Props) -> anyhow::Result<String> {
    if let Some(b) = flag {
        return Ok(b.clone());
    }
    match engine::get_prop(props, "bootstrap.servers") {
        Some(b) => Ok(b.to_string()),
        None => bail!(
            "no broker address: pass --bootstrap-server or bootstrap.servers in the properties"
        ),
    }
}

impl ProducerArgs {
    pub fn to_opts(&self) -> anyhow::Result<ProducerOpts> {
        let mut props = match &self.producer_config {
            Some(path) => engine::read_props_file(path)?,
            None => Props::new(),
        };
        for (k, v) in engine::parse_kv_props(&self.producer_props)? {
            engine::set_prop(&mut props, &k, &v);
        }
        let bootstrap = resolve_bootstrap(&self.bootstrap_server, &props)?;
        let delimiter = if self.payload_delimiter == "\\n" {
            "\n".to_string()
        } else {
            self.payload_delimiter.clone()
        };
        Ok(ProducerOpts {
            bootstrap,
            topic: self.topic.clone(),
            num_records: self.num_records,
            record_size: self.record_size,
            payload_file: self.payload_file.clone(),
            payload_delimiter: delimiter,
            throughput: self.throughput,
            props,
            client: self.client,
            create_topic_partitions: self.create_topic_partitions,
            reporting_interval_ms: self.reporting_interval_ms,
            quiet: false,
            max_duration: None,
        })
    }

    pub fn run(&self) -> anyhow::Result<()> {
        let opts = self.to_opts()?;
        let report = run_producer(&opts)?;
        if let Some(path) = &self.json {
            write_json(path, &report)?;
        }
        Ok(())
    }
}

/// What `run_producer` does (library form of the command line).
#[derive(Clone, Debug)]
pub struct ProducerOpts {
    pub bootstrap: String,
    pub topic: String,
    pub num_records: u64,
    /// Payload size; when None, `payload_file` must be set.
    pub record_size: Option<usize>,
    pub payload_file: Option<PathBuf>,
    /// Literal delimiter between payloads in `payload_file`.
    pub payload_delimiter: String,
    /// Records/sec target; <= 0 means unthrottled.
    pub throughput: f64,
    pub props: Props,
    pub client: ClientKind,
    pub create_topic_partitions: Option<i32>,
    pub reporting_interval_ms: u64,
    /// Print nothing (the report still has every figure).
    pub quiet: bool,
    /// Stop sending after this long (and flush for at most as long again): a run against a
    /// broker that stalls or falls far behind the rate ends anyway, with fewer records.
    pub max_duration: Option<Duration>,
}

impl ProducerOpts {
    /// Unthrottled, `record_size`-byte records, librdkafka, default properties.
    pub fn new(bootstrap: &str, topic: &str, num_records: u64, record_size: usize) -> Self {
        ProducerOpts {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            num_records,
            record_size: Some(record_size),
            payload_file: None,
            payload_delimiter: "\n".to_string(),
            throughput: -1.0,
            props: Props::new(),
            client: ClientKind::Librdkafka,
            create_topic_partitions: None,
            reporting_interval_ms: 5000,
            quiet: false,
            max_duration: None,
        }
    }
}

/// One progress window (Kafka's 5-second line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// Seconds since the start at the end of the window.
    pub end_s: f64,
    pub records: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: f64,
}

/// Every figure of a producer-perf run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProducerReport {
    pub tool: String,
    pub client: ClientKind,
    pub bootstrap: String,
    pub topic: String,
    pub props: BTreeMap<String, String>,
    pub num_records: u64,
    pub record_size: Option<usize>,
    pub payload_file: Option<String>,
    /// Target records/sec (-1 = unthrottled).
    pub throughput_target: f64,
    /// Records acknowledged without error.
    pub records_sent: u64,
    /// Records whose delivery failed.
    pub errors: u64,
    /// Times `send` answered QueueFull and was retried.
    pub queue_full_retries: u64,
    pub bytes: u64,
    pub start_time: Timestamp,
    pub end_time: Timestamp,
    pub elapsed_s: f64,
    pub records_per_sec: f64,
    /// MiB/s, as Kafka's "MB/sec".
    pub mb_per_sec: f64,
    /// Intended send time to delivery callback, in ms (microsecond precision).
    pub latency_ms: LatencySummary,
    pub windows: Vec<WindowReport>,
    /// Acknowledged records per second of the run.
    pub series: Vec<SeriesPoint>,
}

impl ProducerReport {
    /// Kafka's final line.
    pub fn kafka_line(&self) -> String {
        total_line(
            self.records_sent,
            self.records_per_sec,
            self.mb_per_sec,
            &self.latency_ms,
        )
    }
}

/// Kafka's final ProducerPerformance line for `count` records.
pub fn total_line(
    count: u64,
    records_per_sec: f64,
    mb_per_sec: f64,
    latency: &LatencySummary,
) -> String {
    format!(
        "{} records sent, {} records/sec ({} MB/sec), {} ms avg latency, {} ms max latency, \
         {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
        count,
        java_f(records_per_sec),
        java_fixed(mb_per_sec, 2),
        java_fixed(latency.avg, 2),
        java_fixed(latency.max, 2),
        latency.p50.floor() as u64,
        latency.p95.floor() as u64,
        latency.p99.floor() as u64,
        latency.p99_9.floor() as u64,
    )
}

/// Our line after Kafka's: every percentile and the max at microsecond precision.
pub fn extra_line(s: &LatencySummary) -> String {
    format!(
        "{:.3} ms 50th, {:.3} ms 95th, {:.3} ms 99th, {:.3} ms 99.9th, {:.3} ms 99.99th, {:.3} ms max.",
        s.p50, s.p95, s.p99, s.p99_9, s.p99_99, s.max
    )
}

/// Kafka's progress line.
pub fn window_line(w: &WindowReport) -> String {
    format!(
        "{} records sent, {} records/sec ({} MB/sec), {} ms avg latency, {} ms max latency.",
        w.records,
        java_fixed(w.records_per_sec, 1),
        java_fixed(w.mb_per_sec, 2),
        java_fixed(w.avg_latency_ms, 1),
        java_fixed(w.max_latency_ms, 1),
    )
}

/// Delivery-side statistics, shared with the callbacks (which run on the producing thread).
struct Stats {
    start: Instant,
    hist: LatencyHistogram,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    series: ThroughputSeries,
    interval: Duration,
    quiet: bool,
    window_start: Instant,
    window_count: u64,
    window_bytes: u64,
    window_sum_us: u128,
    window_max_us: u64,
    windows: Vec<WindowReport>,
}

impl Stats {
    fn new(start: Instant, interval: Duration, quiet: bool) -> Self {
        Stats {
            start,
            hist: LatencyHistogram::new(),
            bytes: 0,
            errors: 0,
            first_error: None,
            series: ThroughputSeries::new(start),
            interval,
            quiet,
            window_start: start,
            window_count: 0,
            window_bytes: 0,
            window_sum_us: 0,
            window_max_us: 0,
            windows: Vec::new(),
        }
    }

    fn record(&mut self, latency_us: u64, bytes: u64, now: Instant) {
        self.hist.record_us(latency_us);
        self.bytes += bytes;
        self.series.record(now, 1, bytes);
        self.window_count += 1;
        self.window_bytes += bytes;
        self.window_sum_us += latency_us as u128;
        self.window_max_us = self.window_max_us.max(latency_us);
        if now.saturating_duration_since(self.window_start) >= self.interval {
            let elapsed = now
                .saturating_duration_since(self.window_start)
                .as_secs_f64();
            let w = WindowReport {
                end_s: now.saturating_duration_since(self.start).as_secs_f64(),
                records: self.window_count,
                records_per_sec: self.window_count as f64 / elapsed,
                mb_per_sec: mb(self.window_bytes) / elapsed,
                avg_latency_ms: self.window_sum_us as f64 / self.window_count as f64 / 1000.0,
                max_latency_ms: self.window_max_us as f64 / 1000.0,
            };
            if !self.quiet {
                println!("{}", window_line(&w));
            }
            self.windows.push(w);
            self.window_start = now;
            self.window_count = 0;
            self.window_bytes = 0;
            self.window_sum_us = 0;
            self.window_max_us = 0;
        }
    }

    fn fail(&mut self, error: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            if !self.quiet {
                eprintln!("delivery failed: {error}");
            }
            self.first_error = Some(error);
        }
    }
}

/// Builds the payloads: 64 random `A-Z` payloads of `record_size`, or the file's pieces.
fn payloads(opts: &ProducerOpts) -> anyhow::Result<Vec<Vec<u8>>> {
    match (&opts.payload_file, opts.record_size) {
        (Some(_), Some(_)) => {
            bail!("either --record-size or --payload-file must be specified but not both")
        }
        (None, None) => bail!("either --record-size or --payload-file must be specified"),
        (None, Some(0)) => bail!("--record-size should be greater than zero"),
        (None, Some(size)) => {
            let mut rng = rand::rngs::StdRng::seed_from_u64(0);
            Ok((0..64)
                .map(|_| (0..size).map(|_| rng.gen_range(b'A'..=b'Z')).collect())
                .collect())
        }
        (Some(path), None) => {
            let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            if !opts.quiet {
                println!("Reading payloads from: {}", abs.display());
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            if text.is_empty() {
                bail!("File does not exist or empty file provided.");
            }
            let list: Vec<Vec<u8>> = text
                .split(opts.payload_delimiter.as_str())
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec())
                .collect();
            if !opts.quiet {
                println!("Number of messages read: {}", list.len());
            }
            if list.is_empty() {
                bail!("no payloads in {}", path.display());
            }
            Ok(list)
        }
    }
}

/// How long a run's final flush may wait: 600 s, or the run's `max_duration` (10 s at least).
pub fn flush_timeout(max_duration: Option<Duration>) -> Duration {
    max_duration.map_or(Duration::from_secs(600), |max| {
        max.max(Duration::from_secs(10))
    })
}

/// Runs producer-perf: prints Kafka's lines (unless `quiet`) and returns every figure.
pub fn run_producer(opts: &ProducerOpts) -> anyhow::Result<ProducerReport> {
    if opts.num_records == 0 {
        bail!("--num-records should be greater than zero");
    }
    let payloads = payloads(opts)?;
    if let Some(partitions) = opts.create_topic_partitions {
        engine::create_topic(&opts.bootstrap, &opts.topic, partitions)?;
    }
    let mut props = opts.props.clone();
    if engine::get_prop(&props, "client.id").is_none() {
        engine::set_prop(&mut props, "client.id", "perf-producer-client");
    }
    let mut producer = engine::producer(opts.client, &opts.bootstrap, &props)?;

    let start_wall = SystemTime::now();
    let start = Instant::now();
    let interval = Duration::from_millis(opts.reporting_interval_ms.max(1));
    let stats = Arc::new(Mutex::new(Stats::new(start, interval, opts.quiet)));
    let pacer = Pacer::new(start, opts.throughput);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut queue_full = 0u64;

    for i in 0..opts.num_records {
        if opts.max_duration.is_some_and(|max| start.elapsed() > max) {
            break;
        }
        let intended = pacer.intended(i);
        if pacer.throttled() {
            pacer.wait_until(intended, producer.as_mut());
        }
        let payload = if opts.payload_file.is_some() {
            &payloads[rng.gen_range(0..payloads.len())]
        } else {
            &payloads[(i % payloads.len() as u64) as usize]
        };
        let timestamp_ms = super::output::unix_ms(SystemTime::now());
        loop {
            let stats = Arc::clone(&stats);
            let bytes = payload.len() as u64;
            let callback: engine::DeliveryCallback = Box::new(move |result| {
                let now = Instant::now();
                let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                match result {
                    Ok(_) => s.record(
                        now.saturating_duration_since(intended).as_micros() as u64,
                        bytes,
                        now,
                    ),
                    Err(e) => s.fail(e),
                }
            });
            match producer.send(&opts.topic, None, None, payload, timestamp_ms, callback) {
                Ok(()) => break,
                Err(SendError::QueueFull) => {
                    queue_full += 1;
                    producer.poll(Duration::from_millis(1));
                }
                Err(SendError::Other(e)) => bail!("send failed: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    if let Err(e) = producer.flush(flush_timeout(opts.max_duration)) {
        eprintln!("flush failed: {e}");
    }
    let end = Instant::now();
    let end_wall = SystemTime::now();
    drop(producer);

    let s = stats.lock().unwrap_or_else(|e| e.into_inner());
    let count = s.hist.count();
    let elapsed = end.saturating_duration_since(start).as_secs_f64();
    let report = ProducerReport {
        tool: "producer-perf".into(),
        client: opts.client,
        bootstrap: opts.bootstrap.clone(),
        topic: opts.topic.clone(),
        props: props.iter().cloned().collect(),
        num_records: opts.num_records,
        record_size: opts.record_size,
        payload_file: opts.payload_file.as_ref().map(|p| p.display().to_string()),
        throughput_target: opts.throughput,
        records_sent: count,
        errors: s.errors,
        queue_full_retries: queue_full,
        bytes: s.bytes,
        start_time: Timestamp::of(start_wall),
        end_time: Timestamp::of(end_wall),
        elapsed_s: elapsed,
        records_per_sec: count as f64 / elapsed,
        mb_per_sec: mb(s.bytes) / elapsed,
        latency_ms: s.hist.summary(),
        windows: s.windows.clone(),
        series: s.series.points(end),
    };
    if !opts.quiet {
        println!("{}", report.kafka_line());
        println!("{}", extra_line(&report.latency_ms));
        if s.errors > 0 {
            eprintln!(
                "{} records failed; first error: {}",
                s.errors,
                s.first_error.as_deref().unwrap_or("")
            );
        }
    }
    Ok(report)
}
