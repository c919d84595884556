//! `bench consumer-perf`: Kafka's `kafka-consumer-perf-test` (ConsumerPerformance.java), over
//! either client engine.
//!
//! Output, as Kafka prints it:
//! - header: `start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
//!   nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`
//!   (with `--show-detailed-stats`: `time, threadId, data.consumed.in.MB, MB.sec, ...`);
//! - summary (not with `--show-detailed-stats`, as in Kafka):
//!   `%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f` with dates as
//!   `yyyy-MM-dd HH:mm:ss:SSS` (local time);
//! - with `--show-detailed-stats`, every `--reporting-interval` ms:
//!   `%s, %d, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f`.
//!
//! There is no consumer group: the consumer assigns every partition from the earliest offset.
//! `rebalance.time.ms` is the time that assignment took (metadata lookup + assign), the
//! counterpart of Kafka's group join time; `fetch.time.ms` is the rest.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::output::{java_fixed, kafka_date, mb, unix_ms, write_json, Timestamp};
use super::rate::{SeriesPoint, ThroughputSeries};
use crate::engine::{self, ClientKind, ConsumedRecord, Props};

pub const HEADER: &str =
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
                          rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
pub const DETAILED_HEADER: &str =
    "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
                                   rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";

#[derive(clap::Args, Debug, Clone)]
pub struct ConsumerArgs {
    /// The server(s) to connect to.
    #[arg(long = "bootstrap-server")]
    pub bootstrap_server: String,
    /// The topic to consume from.
    #[arg(long)]
    pub topic: String,
    /// The number of messages to consume.
    #[arg(long)]
    pub messages: u64,
    /// The maximum allowed time in milliseconds between returned records.
    #[arg(long, default_value_t = 10_000)]
    pub timeout: u64,
    /// Consumer config properties file.
    #[arg(long = "consumer.config", value_name = "CONFIG-FILE")]
    pub consumer_config: Option<PathBuf>,
    /// Client engine.
    #[arg(long, value_enum, default_value_t = ClientKind::Librdkafka)]
    pub client: ClientKind,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Report stats for each reporting interval instead of the summary.
    #[arg(long = "show-detailed-stats")]
    pub show_detailed_stats: bool,
    /// Interval in milliseconds at which to print progress info.
    #[arg(long = "reporting-interval", default_value_t = 5000)]
    pub reporting_interval: u64,
    /// Skip printing the header.
    #[arg(long = "hide-header")]
    pub hide_header: bool,
}

impl ConsumerArgs {
    pub fn to_opts(&self) -> anyhow::Result<ConsumerOpts> {
        let props = match &self.consumer_config {
            Some(path) => engine::read_props_file(path)?,
            None => Props::new(),
        };
        if self.reporting_interval == 0 {
            bail!("Reporting interval must be greater than 0.");
        }
        Ok(ConsumerOpts {
            bootstrap: self.bootstrap_server.clone(),
            topic: self.topic.clone(),
            messages: self.messages,
            timeout_ms: self.timeout,
            props,
            client: self.client,
            show_detailed_stats: self.show_detailed_stats,
            reporting_interval_ms: self.reporting_interval,
            hide_header: self.hide_header,
            quiet: false,
        })
    }

    pub fn run(&self) -> anyhow::Result<()> {
        let report = run_consumer(&self.to_opts()?)?;
        if let Some(path) = &self.json {
            write_json(path, &report)?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct ConsumerOpts {
    pub bootstrap: String,
    pub topic: String,
    pub messages: u64,
    /// Give up when no record arrived for this long.
    pub timeout_ms: u64,
    pub props: Props,
    pub client: ClientKind,
    pub show_detailed_stats: bool,
    pub reporting_interval_ms: u64,
    pub hide_header: bool,
    /// Print nothing (the report still has every figure).
    pub quiet: bool,
}

impl ConsumerOpts {
    pub fn new(bootstrap: &str, topic: &str, messages: u64) -> Self {
        ConsumerOpts {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            messages,
            timeout_ms: 10_000,
            props: Props::new(),
            client: ClientKind::Librdkafka,
            show_detailed_stats: false,
            reporting_interval_ms: 5000,
            hide_header: false,
            quiet: false,
        }
    }
}

/// Every figure of a consumer-perf run (the summary line's columns, plus more).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConsumerReport {
    pub tool: String,
    pub client: ClientKind,
    pub bootstrap: String,
    pub topic: String,
    pub props: std::collections::BTreeMap<String, String>,
    pub partitions: Vec<i32>,
    pub messages_target: u64,
    pub start_time: Timestamp,
    pub end_time: Timestamp,
    pub elapsed_s: f64,
    /// data.consumed.in.MB (MiB of keys + values).
    pub mb_consumed: f64,
    pub bytes: u64,
    pub mb_per_sec: f64,
    /// data.consumed.in.nMsg.
    pub messages: u64,
    pub messages_per_sec: f64,
    /// rebalance.time.ms: time to look up and assign the partitions.
    pub rebalance_time_ms: i64,
    /// fetch.time.ms: elapsed minus rebalance time.
    pub fetch_time_ms: i64,
    pub fetch_mb_per_sec: f64,
    pub fetch_messages_per_sec: f64,
    /// True when the tool stopped on --timeout before reading `messages_target`.
    pub timed_out: bool,
    /// Poll errors reported by the engine (the tool keeps polling).
    pub poll_errors: u64,
    /// Records consumed in each second of the run.
    pub series: Vec<SeriesPoint>,
}

impl ConsumerReport {
    /// Kafka's summary line.
    pub fn kafka_line(&self) -> String {
        format!(
            "{}, {}, {}, {}, {}, {}, {}, {}, {}, {}",
            kafka_date(
                std::time::UNIX_EPOCH + Duration::from_millis(self.start_time.unix_ms as u64)
            ),
            kafka_date(std::time::UNIX_EPOCH + Duration::from_millis(self.end_time.unix_ms as u64)),
            java_fixed(self.mb_consumed, 4),
            java_fixed(self.mb_per_sec, 4),
            self.messages,
            java_fixed(self.messages_per_sec, 4),
            self.rebalance_time_ms,
            self.fetch_time_ms,
            java_fixed(self.fetch_mb_per_sec, 4),
            java_fixed(self.fetch_messages_per_sec, 4),
        )
    }
}

/// Runs consumer-perf: prints Kafka's lines (unless `quiet`) and returns every figure.
pub fn run_consumer(opts: &ConsumerOpts) -> anyhow::Result<ConsumerReport> {
    let print = !opts.quiet;
    if print && !opts.hide_header {
        println!(
            "{}",
            if opts.show_detailed_stats {
                DETAILED_HEADER
            } else {
                HEADER
            }
        );
    }
    let mut props = opts.props.clone();
    if engine::get_prop(&props, "client.id").is_none() {
        engine::set_prop(&mut props, "client.id", "perf-consumer-client");
    }
    let mut consumer = engine::consumer(opts.client, &opts.bootstrap, &props)?;

    // Kafka's clock: whole milliseconds of wall time.
    let start_wall = SystemTime::now();
    let start_ms = unix_ms(start_wall);
    let start = Instant::now();
    let partitions = consumer
        .assign_all(&opts.topic)
        .map_err(|e| anyhow::anyhow!(e))?;
    let join_time_ms = unix_ms(SystemTime::now()) - start_ms;
    let mut join_in_round = join_time_ms;

    let timeout = opts.timeout_ms as i64;
    let interval = opts.reporting_interval_ms as i64;
    let mut series = ThroughputSeries::new(start);
    let mut batch: Vec<ConsumedRecord> = Vec::with_capacity(16 * 1024);
    let (mut messages, mut bytes) = (0u64, 0u64);
    let (mut last_messages, mut last_bytes) = (0u64, 0u64);
    let mut poll_errors = 0u64;
    let mut now_ms = unix_ms(SystemTime::now());
    let mut last_report_ms = start_ms;
    let mut last_consumed_ms = now_ms;

    while messages < opts.messages && now_ms - last_consumed_ms <= timeout {
        batch.clear();
        if let Err(e) = consumer.poll_into(&mut batch, Duration::from_millis(100)) {
            poll_errors += 1;
            if print && poll_errors <= 10 {
                eprintln!("poll error: {e}");
            }
        }
        let now = Instant::now();
        now_ms = unix_ms(SystemTime::now());
        if !batch.is_empty() {
            last_consumed_ms = now_ms;
        }
        let mut batch_bytes = 0u64;
        for r in &batch {
            messages += 1;
            let b = (r.key_len + r.value_len) as u64;
            bytes += b;
            batch_bytes += b;
            if now_ms - last_report_ms >= interval {
                if opts.show_detailed_stats && print {
                    println!(
                        "{}",
                        progress_line(
                            bytes,
                            last_bytes,
                            messages,
                            last_messages,
                            last_report_ms,
                            now_ms,
                            join_in_round
                        )
                    );
                }
                join_in_round = 0;
                last_report_ms = now_ms;
                last_messages = messages;
                last_bytes = bytes;
            }
        }
        series.record(now, batch.len() as u64, batch_bytes);
    }
    let timed_out = messages < opts.messages;
    if timed_out && print {
        println!(
            "WARNING: Exiting before consuming the expected number of messages: timeout ({} ms) exceeded. \
             You can use the --timeout option to increase the timeout.",
            opts.timeout_ms
        );
    }
    drop(consumer);
    let end = Instant::now();
    let end_wall = SystemTime::now();
    let end_ms = unix_ms(end_wall);

    let elapsed_s = (end_ms - start_ms) as f64 / 1000.0;
    let fetch_time_ms = (end_ms - start_ms) - join_time_ms;
    let total_mb = mb(bytes);
    let report = ConsumerReport {
        tool: "consumer-perf".into(),
        client: opts.client,
        bootstrap: opts.bootstrap.clone(),
        topic: opts.topic.clone(),
        props: props.iter().cloned().collect(),
        partitions,
        messages_target: opts.messages,
        start_time: Timestamp::of(start_wall),
        end_time: Timestamp::of(end_wall),
        elapsed_s,
        mb_consumed: total_mb,
        bytes,
        mb_per_sec: total_mb / elapsed_s,
        messages,
        messages_per_sec: messages as f64 / elapsed_s,
        rebalance_time_ms: join_time_ms,
        fetch_time_ms,
        fetch_mb_per_sec: total_mb / (fetch_time_ms as f64 / 1000.0),
        fetch_messages_per_sec: messages as f64 / (fetch_time_ms as f64 / 1000.0),
        timed_out,
        poll_errors,
        series: series.points(end),
    };
    if print && !opts.show_detailed_stats {
        println!("{}", report.kafka_line());
    }
    Ok(report)
}

/// Kafka's `--show-detailed-stats` line (thread id 0).
pub fn progress_line(
    bytes: u64,
    last_bytes: u64,
    messages: u64,
    last_messages: u64,
    start_ms: i64,
    end_ms: i64,
    join_in_round_ms: i64,
) -> String {
    let elapsed_ms = (end_ms - start_ms) as f64;
    let total_mb = mb(bytes);
    let interval_mb = mb(bytes - last_bytes);
    let interval_mb_per_sec = 1000.0 * interval_mb / elapsed_ms;
    let interval_msgs_per_sec = ((messages - last_messages) as f64 / elapsed_ms) * 1000.0;
    let fetch_time_ms = end_ms - start_ms - join_in_round_ms;
    let (fetch_mb_per_sec, fetch_msgs_per_sec) = if fetch_time_ms <= 0 {
        (0.0, 0.0)
    } else {
        (
            1000.0 * interval_mb / fetch_time_ms as f64,
            1000.0 * (messages - last_messages) as f64 / fetch_time_ms as f64,
        )
    };
    format!(
        "{}, 0, {}, {}, {}, {}, {}, {}, {}, {}",
        kafka_date(std::time::UNIX_EPOCH + Duration::from_millis(end_ms as u64)),
        java_fixed(total_mb, 4),
        java_fixed(interval_mb_per_sec, 4),
        messages,
        java_fixed(interval_msgs_per_sec, 4),
        join_in_round_ms,
        fetch_time_ms,
        java_fixed(fetch_mb_per_sec, 4),
        java_fixed(fetch_msgs_per_sec, 4),
    )
}
