//! `bench compare`: one workload against two brokers on the same machine, alternating
//! A B A B for several rounds, then each metric's median and the ratio A/B as a Markdown
//! table (and JSON, and a PNG figure).
//!
//! Workloads are TOML files (`bench/workloads/`, named after the OpenMessaging Benchmark
//! ones); see [`Workload`]. Every round uses a fresh topic, deleted afterwards (best effort),
//! so rounds do not read or grow each other's data.
//!
//! Metrics (see `crate::cpu` for the CPU definitions):
//! - throughput: records/s and MiB/s of payload (record value bytes);
//! - latency p50/p99/p99.9 in ms: produce workloads: intended send time to acknowledgement
//!   (so a fixed-rate run counts queueing behind a slow broker); e2e workloads: intended
//!   send time to consumption; consume workloads have none;
//! - broker CPU s/GiB of payload and broker CPU µs/record; client CPU s/GiB.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::cpu::{self, CpuSampler, CpuUsage};
use crate::engine::{ClientKind, Props};
use crate::perf::{self, LatencySummary};
use crate::plot;

pub use crate::compare_table::*;

/// What a workload measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Produce the records; throughput and produce latency.
    #[default]
    Produce,
    /// Produce the records (not measured), then consume them all (measured).
    Consume,
    /// Produce and consume at once; latency from intended send to consumption.
    E2e,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::E2e => "e2e",
        }
    }
}

/// A workload file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub mode: Mode,
    /// Topics written at once (one producer thread each when more than one).
    #[serde(default = "one_u32")]
    pub topics: u32,
    #[serde(default = "one_i32")]
    pub partitions_per_topic: i32,
    /// Value bytes of each record (no key).
    pub record_size: usize,
    /// Records of a run, over all topics. Either this or `duration_s` with a `rate`.
    #[serde(default)]
    pub num_records: Option<u64>,
    /// Run length at the fixed `rate` (num_records = rate x duration_s).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Records/s over all topics; 0 = as fast as the client goes.
    #[serde(default)]
    pub rate: f64,
    /// Client engine: "native" or "librdkafka".
    #[serde(default = "native")]
    pub client: ClientKind,
    /// Also consume the records after producing them, as a second measured run (consume
    /// throughput). `mode = "consume"` measures only that.
    #[serde(default)]
    pub consumer: bool,
    /// Producer properties (Kafka names: acks, linger.ms, batch.size, compression.type...).
    #[serde(default)]
    pub producer: BTreeMap<String, toml::Value>,
    /// Consumer properties.
    #[serde(default, rename = "consumer-props")]
    pub consumer_props: BTreeMap<String, toml::Value>,
}

fn one_u32() -> u32 {
    1
}
fn one_i32() -> i32 {
    1
}
fn native() -> ClientKind {
    ClientKind::Native
}

fn props_of(map: &BTreeMap<String, toml::Value>) -> Props {
    map.iter()
        .map(|(k, v)| {
            let v = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

impl Workload {
    pub fn load(path: &Path) -> Result<Workload> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let workload: Workload =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        workload.num_records()?;
        Ok(workload)
    }

    /// Records of a run.
    pub fn num_records(&self) -> Result<u64> {
        match (self.num_records, self.duration_s) {
            (Some(n), _) => Ok(n),
            (None, Some(d)) if self.rate > 0.0 => Ok((self.rate * d).round() as u64),
            _ => bail!(
                "workload {}: set num_records, or duration_s with a rate",
                self.name
            ),
        }
    }

    pub fn producer_props(&self) -> Props {
        props_of(&self.producer)
    }

    pub fn consumer_props(&self) -> Props {
        props_of(&self.consumer_props)
    }

    /// Applies `--set key=value` (producer properties), `--records`, `--rate`, `--client`.
    pub fn apply_overrides(&mut self, args: &CompareArgs) -> Result<()> {
        for item in &args.set {
            let (k, v) = item
                .split_once('=')
                .with_context(|| format!("--set {item}: expected key=value"))?;
            self.producer.insert(
                k.trim().to_string(),
                toml::Value::String(v.trim().to_string()),
            );
        }
        if let Some(n) = args.records {
            self.num_records = Some(n);
        }
        if let Some(rate) = args.rate {
            self.rate = rate;
        }
        if let Some(client) = args.client {
            self.client = client;
        }
        if let Some(mode) = args.mode {
            self.mode = mode;
        }
        Ok(())
    }
}

/// `bench compare` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Bootstrap address of broker A.
    #[arg(long)]
    pub a: String,
    /// Bootstrap address of broker B (or --b-peer).
    #[arg(long, required_unless_present = "b_peer", conflicts_with = "b_peer")]
    pub b: Option<String>,
    #[arg(long, default_value = "A")]
    pub a_name: String,
    #[arg(long, default_value = "B")]
    pub b_name: String,
    /// Pid of broker A (default: the process listening on A's port).
    #[arg(long)]
    pub a_pid: Option<u32>,
    /// Pid of broker B (default: the process listening on B's port).
    #[arg(long)]
    pub b_pid: Option<u32>,
    /// Start broker B with scripts/kafka-peer.sh (Apache Kafka, KRaft) for this run and stop
    /// it after; its name is the peer's (kafka, kafka3) unless --b-name is given.
    #[arg(long, value_enum)]
    pub b_peer: Option<crate::peer::PeerKind>,
    /// With --b-peer: the peer's directory (config, data, logs; kept). Default: a temporary
    /// one, removed after.
    #[arg(long)]
    pub peer_dir: Option<PathBuf>,
    /// Workload file (TOML, see bench/workloads/).
    #[arg(long)]
    pub workload: PathBuf,
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Draw latency percentiles and throughput over time of both to this PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write every round's figures and the medians as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override a producer property of the workload (repeatable): --set acks=all
    #[arg(long)]
    pub set: Vec<String>,
    /// Override the workload's record count.
    #[arg(long)]
    pub records: Option<u64>,
    /// Override the workload's rate (records/s, 0 = max).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Override the workload's client engine.
    #[arg(long, value_enum)]
    pub client: Option<ClientKind>,
    /// Override the workload's mode.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Title of the table and figure (default: the workload's name and overrides).
    #[arg(long)]
    pub title: Option<String>,
    /// Print the perf tools' progress lines.
    #[arg(long)]
    pub verbose: bool,
}

/// The figures of one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metrics {
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub records_per_sec: f64,
    pub mib_per_sec: f64,
    pub latency_ms: Option<LatencySummary>,
    pub broker_cpu_s: Option<f64>,
    pub client_cpu_s: f64,
    pub broker_cpu_s_per_gib: Option<f64>,
    pub broker_cpu_us_per_record: Option<f64>,
    pub client_cpu_s_per_gib: Option<f64>,
    /// (seconds, records/s) per second of the run.
    pub series: Vec<(f64, f64)>,
}

impl Metrics {
    fn with_cpu(mut self, usage: &CpuUsage) -> Metrics {
        self.broker_cpu_s = usage.broker_cpu_s;
        self.client_cpu_s = usage.client_cpu_s;
        self.broker_cpu_s_per_gib = usage.broker_cpu_s_per_gib(self.bytes);
        self.broker_cpu_us_per_record = usage.broker_cpu_us_per_request(self.records);
        self.client_cpu_s_per_gib = usage.client_cpu_s_per_gib(self.bytes);
        self
    }

    /// The throughput series without a last, partial second (which would read as a drop),
    /// unless that is all there is.
    pub fn full_seconds(&self) -> Vec<(f64, f64)> {
        let full: Vec<(f64, f64)> = self
            .series
            .iter()
            .copied()
            .filter(|&(t, _)| t + 0.5 <= self.elapsed_s + 0.05)
            .collect();
        if full.is_empty() {
            self.series.clone()
        } else {
            full
        }
    }

    /// Percentile points for a figure: (percentile, ms).
    pub fn percentile_points(&self) -> Vec<(f64, f64)> {
        match &self.latency_ms {
            None => Vec::new(),
            Some(l) => vec![
                (50.0, l.p50),
                (95.0, l.p95),
                (99.0, l.p99),
                (99.9, l.p99_9),
                (99.99, l.p99_99),
                (plot::TOP_PERCENTILE, l.max),
            ],
        }
    }
}

/// A broker under test.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub bootstrap: String,
    pub broker: Option<u32>,
}

fn unique_topic(workload: &str, side: &str, round: u32) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let side: String = side
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!(
        "bench-{workload}-{side}-r{round}-{}-{ms}",
        std::process::id()
    )
}

/// Runs one workload once against `bootstrap`, sampling `broker` CPU around the measured
/// part. Topics are named after `topic_base` (`-<i>` appended when there are several).
/// Returns the measured runs: one, or two when `workload.consumer` (produce, then consume).
pub fn run_workload(
    workload: &Workload,
    bootstrap: &str,
    broker: impl Into<cpu::BrokerCpu>,
    topic_base: &str,
    quiet: bool,
) -> Result<Vec<(Mode, Metrics)>> {
    let broker = broker.into();
    let topics: Vec<String> = if workload.topics <= 1 {
        vec![topic_base.to_string()]
    } else {
        (0..workload.topics)
            .map(|i| format!("{topic_base}-{i}"))
            .collect()
    };
    let total = workload.num_records()?;
    let mut out = Vec::new();
    match workload.mode {
        Mode::Produce | Mode::Consume => {
            let measure_produce = workload.mode == Mode::Produce;
            let sampler = CpuSampler::start(broker.clone());
            let produced = produce_topics(workload, bootstrap, &topics, total, quiet)?;
            let usage = sampler.stop();
            if measure_produce {
                out.push((Mode::Produce, produced.with_cpu(&usage)));
            }
            if workload.consumer || workload.mode == Mode::Consume {
                let sampler = CpuSampler::start(broker.clone());
                let consumed = consume_topics(workload, bootstrap, &topics, total, quiet)?;
                let usage = sampler.stop();
                out.push((Mode::Consume, consumed.with_cpu(&usage)));
            }
        }
        Mode::E2e => {
            anyhow::ensure!(workload.topics <= 1, "e2e workloads use one topic");
            let mut opts = perf::E2eOpts::new(
                bootstrap,
                &topics[0],
                total,
                workload.record_size,
                workload.rate,
            );
            opts.producer_props = workload.producer_props();
            opts.consumer_props = workload.consumer_props();
            opts.client = workload.client;
            opts.create_topic_partitions = workload.partitions_per_topic;
            opts.quiet = quiet;
            let sampler = CpuSampler::start(broker.clone());
            let report = perf::run_e2e(&opts)?;
            let usage = sampler.stop();
            let metrics = Metrics {
                records: report.records_received,
                bytes: report.records_received * workload.record_size as u64,
                errors: report.send_errors + u64::from(report.timed_out),
                elapsed_s: report.elapsed_s,
                records_per_sec: report.records_per_sec,
                mib_per_sec: report.mb_per_sec,
                latency_ms: Some(report.latency_ms.clone()),
                series: report
                    .series
                    .iter()
                    .map(|p| (p.t_s as f64 + 0.5, p.records_per_sec))
                    .collect(),
                ..Default::default()
            };
            out.push((Mode::E2e, metrics.with_cpu(&usage)));
        }
    }
    for topic in &topics {
        let _ = delete_topic(bootstrap, topic);
    }
    Ok(out)
}

fn produce_topics(
    workload: &Workload,
    bootstrap: &str,
    topics: &[String],
    total: u64,
    quiet: bool,
) -> Result<Metrics> {
    let per_topic = total.div_ceil(topics.len() as u64).max(1);
    let opts = |topic: &str| {
        let mut opts = perf::ProducerOpts::new(bootstrap, topic, per_topic, workload.record_size);
        opts.throughput = if workload.rate > 0.0 {
            workload.rate / topics.len() as f64
        } else {
            -1.0
        };
        opts.props = workload.producer_props();
        opts.client = workload.client;
        opts.create_topic_partitions = Some(workload.partitions_per_topic);
        opts.quiet = quiet || topics.len() > 1;
        opts
    };
    let reports: Vec<perf::ProducerReport> = if topics.len() == 1 {
        vec![perf::run_producer(&opts(&topics[0]))?]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = topics
                .iter()
                .map(|topic| {
                    let opts = opts(topic);
                    scope.spawn(move || perf::run_producer(&opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("producer thread panicked"))
                .collect::<Result<Vec<_>>>()
        })?
    };
    Ok(merge_producer_reports(&reports))
}

/// One topic's report as is; several topics': summed counts and series, throughput over the
/// longest elapsed time, latency percentiles the worst topic's (an upper bound: the
/// reports carry percentiles, not histograms).
pub fn merge_producer_reports(reports: &[perf::ProducerReport]) -> Metrics {
    let records: u64 = reports.iter().map(|r| r.records_sent).sum();
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let elapsed_s = reports.iter().map(|r| r.elapsed_s).fold(0.0, f64::max);
    let mut series: BTreeMap<u64, f64> = BTreeMap::new();
    for r in reports {
        for p in &r.series {
            *series.entry(p.t_s).or_default() += p.records_per_sec;
        }
    }
    let latency = if reports.len() == 1 {
        reports[0].latency_ms.clone()
    } else {
        let max = |f: fn(&LatencySummary) -> f64| {
            reports.iter().map(|r| f(&r.latency_ms)).fold(0.0, f64::max)
        };
        LatencySummary {
            count: reports.iter().map(|r| r.latency_ms.count).sum(),
            avg: max(|l| l.avg),
            min: reports
                .iter()
                .map(|r| r.latency_ms.min)
                .fold(f64::MAX, f64::min),
            max: max(|l| l.max),
            p50: max(|l| l.p50),
            p95: max(|l| l.p95),
            p99: max(|l| l.p99),
            p99_9: max(|l| l.p99_9),
            p99_99: max(|l| l.p99_99),
        }
    };
    Metrics {
        records,
        bytes,
        errors: reports.iter().map(|r| r.errors).sum(),
        elapsed_s,
        records_per_sec: if elapsed_s > 0.0 {
            records as f64 / elapsed_s
        } else {
            0.0
        },
        mib_per_sec: if elapsed_s > 0.0 {
            bytes as f64 / (1024.0 * 1024.0) / elapsed_s
        } else {
            0.0
        },
        latency_ms: Some(latency),
        series: series
            .into_iter()
            .map(|(t, v)| (t as f64 + 0.5, v))
            .collect(),
        ..Default::default()
    }
}

fn consume_topics(
    workload: &Workload,
    bootstrap: &str,
    topics: &[String],
    total: u64,
    quiet: bool,
) -> Result<Metrics> {
    let per_topic = total.div_ceil(topics.len() as u64).max(1);
    let opts = |topic: &str| {
        let mut opts = perf::ConsumerOpts::new(bootstrap, topic, per_topic);
        opts.props = workload.consumer_props();
        opts.client = workload.client;
        opts.quiet = quiet || topics.len() > 1;
        opts.hide_header = true;
        opts
    };
    let reports: Vec<perf::ConsumerReport> = if topics.len() == 1 {
        vec![perf::run_consumer(&opts(&topics[0]))?]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = topics
                .iter()
                .map(|topic| {
                    let opts = opts(topic);
                    scope.spawn(move || perf::run_consumer(&opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("consumer thread panicked"))
                .collect::<Result<Vec<_>>>()
        })?
    };
    let records: u64 = reports.iter().map(|r| r.messages).sum();
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let elapsed_s = reports.iter().map(|r| r.elapsed_s).fold(0.0, f64::max);
    let mut series: BTreeMap<u64, f64> = BTreeMap::new();
    for r in &reports {
        for p in &r.series {
            *series.entry(p.t_s).or_default() += p.records_per_sec;
        }
    }
    Ok(Metrics {
        records,
        bytes,
        errors: reports
            .iter()
            .map(|r| r.poll_errors + u64::from(r.timed_out))
            .sum(),
        elapsed_s,
        records_per_sec: if elapsed_s > 0.0 {
            records as f64 / elapsed_s
        } else {
            0.0
        },
        mib_per_sec: if elapsed_s > 0.0 {
            bytes as f64 / (1024.0 * 1024.0) / elapsed_s
        } else {
            0.0
        },
        latency_ms: None,
        series: series
            .into_iter()
            .map(|(t, v)| (t as f64 + 0.5, v))
            .collect(),
        ..Default::default()
    })
}

/// Deletes a topic with one DeleteTopics v1 request (best effort: brokers without
/// DeleteTopics just close the connection).
pub fn delete_topic(bootstrap: &str, topic: &str) -> Result<()> {
    use wire::generated::api::{self, ApiKey};
    use wire::generated::delete_topics_request::DeleteTopicState;
    use wire::generated::{
        DeleteTopicsRequest, DeleteTopicsResponse, RequestHeader, ResponseHeader,
    };
    use wire::primitives::{Decodable, Encodable};
    let addr = crate::native::parse_bootstrap(bootstrap)
        .into_iter()
        .next()
        .context("empty bootstrap")?;
    let mut stream = TcpStream::connect(&addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let version = 1;
    let key = ApiKey::DeleteTopics as i16;
    let header = RequestHeader {
        request_api_key: key,
        request_api_version: version,
        correlation_id: 1,
        client_id: Some("bench-compare".into()),
        ..Default::default()
    };
    let request = DeleteTopicsRequest {
        topic_names: vec![topic.to_string()],
        topics: Vec::<DeleteTopicState>::new(),
        timeout_ms: 10_000,
        ..Default::default()
    };
    let mut body = BytesMut::new();
    header.encode(&mut body, api::request_header_version(key, version))?;
    request.encode(&mut body, version)?;
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut buf = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    stream.read_exact(&mut buf)?;
    let mut buf = Bytes::from(buf);
    ResponseHeader::decode(&mut buf, api::response_header_version(key, version))?;
    let response = DeleteTopicsResponse::decode(&mut buf, version)?;
    match response.responses.first().map(|r| r.error_code) {
        Some(0) => Ok(()),
        other => bail!("DeleteTopics {topic}: {other:?}"),
    }
}

/// Everything `bench compare --json` writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareReport {
    pub title: String,
    pub workload: Workload,
    pub a_name: String,
    pub b_name: String,
    pub a_bootstrap: String,
    pub b_bootstrap: String,
    pub rounds: u32,
    /// Per mode measured (produce, consume, e2e): the runs of A and of B, and the summary.
    pub results: Vec<ModeResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeResult {
    pub mode: Mode,
    pub a_runs: Vec<Metrics>,
    pub b_runs: Vec<Metrics>,
    pub summary: Summary,
    pub table: String,
}

fn default_title(workload: &Workload, args: &CompareArgs) -> String {
    let mut title = workload.name.clone();
    for s in &args.set {
        title.push_str(&format!(" {s}"));
    }
    title
}

/// Runs the comparison; prints the tables; writes --json and --plot.
pub fn run(args: &CompareArgs) -> Result<CompareReport> {
    let Some(kind) = args.b_peer else {
        if args.peer_dir.is_some() {
            bail!("--peer-dir goes with --b-peer");
        }
        return run_against(args, args.b.as_deref().unwrap_or_default());
    };
    let peer = crate::peer::Peer::start(kind, args.peer_dir.as_deref())?;
    eprintln!("B: {}", peer.describe());
    let mut args = args.clone();
    if args.b_name == "B" {
        args.b_name = kind.name().to_string();
    }
    args.b_pid = args.b_pid.or(Some(peer.pid));
    let result = run_against(&args, &peer.bootstrap);
    drop(peer);
    result
}

fn run_against(args: &CompareArgs, b: &str) -> Result<CompareReport> {
    let mut workload = Workload::load(&args.workload)?;
    workload.apply_overrides(args)?;
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| default_title(&workload, args));
    let targets = [
        Target {
            name: args.a_name.clone(),
            bootstrap: args.a.clone(),
            broker: cpu::resolve_broker_pid(args.a_pid, &args.a),
        },
        Target {
            name: args.b_name.clone(),
            bootstrap: b.to_string(),
            broker: cpu::resolve_broker_pid(args.b_pid, b),
        },
    ];
    for t in &targets {
        eprintln!(
            "{}: {} (broker pid {})",
            t.name,
            t.bootstrap,
            t.broker.map_or("not found".into(), |p| p.to_string())
        );
    }
    let mut runs: [Vec<Vec<(Mode, Metrics)>>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds.max(1) {
        for (side, target) in targets.iter().enumerate() {
            let topic = unique_topic(&workload.name, &target.name, round);
            eprintln!(
                "round {}/{}: {} on {} ...",
                round + 1,
                args.rounds.max(1),
                workload.name,
                target.name
            );
            let result = run_workload(
                &workload,
                &target.bootstrap,
                target.broker,
                &topic,
                !args.verbose,
            )
            .with_context(|| {
                format!(
                    "{} against {} ({})",
                    workload.name, target.name, target.bootstrap
                )
            })?;
            for (mode, m) in &result {
                eprintln!(
                    "  {:?}: {} records/s, {} MiB/s, p99 {} ms, broker CPU {} s/GiB, errors {}",
                    mode,
                    fmt_num(Some(m.records_per_sec)),
                    fmt_num(Some(m.mib_per_sec)),
                    fmt_num(m.latency_ms.as_ref().map(|l| l.p99)),
                    fmt_num(m.broker_cpu_s_per_gib),
                    m.errors
                );
            }
            runs[side].push(result);
        }
    }
    let modes: Vec<Mode> = runs[0]
        .first()
        .map(|r| r.iter().map(|(m, _)| *m).collect())
        .unwrap_or_default();
    let mut results = Vec::new();
    for (i, mode) in modes.iter().enumerate() {
        let a_runs: Vec<Metrics> = runs[0]
            .iter()
            .filter_map(|r| r.get(i).map(|(_, m)| m.clone()))
            .collect();
        let b_runs: Vec<Metrics> = runs[1]
            .iter()
            .filter_map(|r| r.get(i).map(|(_, m)| m.clone()))
            .collect();
        let summary = summarize(*mode, &a_runs, &b_runs);
        let table = markdown_table(&summary, &args.a_name, &args.b_name);
        results.push(ModeResult {
            mode: *mode,
            a_runs,
            b_runs,
            summary,
            table,
        });
    }
    println!("## {title}\n");
    for r in &results {
        println!("{}", r.table);
    }
    if let Some(path) = &args.plot {
        // The first measured mode with latency (else the first) is drawn.
        if let Some(r) = results
            .iter()
            .find(|r| r.mode != Mode::Consume)
            .or(results.first())
        {
            let series = [(&args.a_name, &r.a_runs), (&args.b_name, &r.b_runs)]
                .into_iter()
                .map(|(name, runs)| {
                    let m = median_run(runs);
                    plot::Series {
                        name: name.clone(),
                        percentiles: m.percentile_points(),
                        throughput: m.full_seconds(),
                    }
                })
                .collect::<Vec<_>>();
            plot::draw(
                path,
                &format!("{title} ({}, median-throughput round)", r.mode.name()),
                &series,
            )?;
        }
    }
    let report = CompareReport {
        title,
        workload,
        a_name: args.a_name.clone(),
        b_name: args.b_name.clone(),
        a_bootstrap: args.a.clone(),
        b_bootstrap: b.to_string(),
        rounds: args.rounds.max(1),
        results,
    };
    if let Some(path) = &args.json {
        perf::output::write_json(path, &report)?;
    }
    Ok(report)
}

/// The run whose throughput is the median (the one drawn).
pub fn median_run(runs: &[Metrics]) -> Metrics {
    let mut sorted: Vec<&Metrics> = runs.iter().collect();
    sorted.sort_by(|x, y| x.records_per_sec.total_cmp(&y.records_per_sec));
    sorted
        .get(sorted.len() / 2)
        .map(|m| (*m).clone())
        .unwrap_or_default()
}

/// The engine's properties as `key=value` (for reports).
pub fn props_line(props: &Props) -> String {
    props
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rps: f64, p99: f64, cpu: Option<f64>) -> Metrics {
        Metrics {
            records_per_sec: rps,
            mib_per_sec: rps / 1000.0,
            latency_ms: Some(LatencySummary {
                p99,
                ..Default::default()
            }),
            broker_cpu_s_per_gib: cpu,
            ..Default::default()
        }
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median([Some(3.0), Some(1.0), Some(2.0)]), Some(2.0));
        assert_eq!(median([Some(3.0), None, Some(1.0)]), Some(2.0));
        assert_eq!(median([None, None]), None);
        let s = summarize(
            Mode::Produce,
            &[
                m(100.0, 2.0, Some(1.0)),
                m(300.0, 4.0, Some(3.0)),
                m(200.0, 3.0, None),
            ],
            &vec![m(100.0, 1.0, None); 3],
        );
        assert_eq!(s.get("records_per_sec").unwrap().ratio, Some(2.0));
        assert_eq!(s.get("p99_ms").unwrap().ratio, Some(3.0));
        assert_eq!(s.get("broker_cpu_s_per_gib").unwrap().a, Some(2.0));
        assert_eq!(s.get("broker_cpu_s_per_gib").unwrap().ratio, None);
        assert_eq!(fmt_ratio(Some(0.0042)), "0.00420");
        assert_eq!(fmt_ratio(Some(0.5)), "0.50");
        assert_eq!(fmt_ratio(Some(12.345)), "12.35");
        let table = markdown_table(&s, "ours", "tansu");
        assert!(
            table.contains("| throughput (records/s) | 200.0 | 100.0 | 2.00 |"),
            "{table}"
        );
        assert!(
            table.starts_with("| metric (produce) | ours (median) | tansu (median) | ours/tansu |"),
            "{table}"
        );
    }

    #[test]
    fn workload_files_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let w = Workload::load(&path).unwrap();
                assert_eq!(
                    format!("{}.toml", w.name),
                    path.file_name().unwrap().to_str().unwrap()
                );
                n += 1;
            }
        }
        assert!(n >= 4);
    }
}

// ---------------------------------------------------------------------------------------
// `bench results`: RESULTS.md from `bench limits --json` and `bench compare --json` files.

/// `bench results` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ResultsArgs {
    /// `bench limits --json` output.
    #[arg(long)]
    pub limits: PathBuf,
    /// A `bench compare --json` output as KEY=FILE (repeatable). Known keys get their figures
    /// set against the limits and the targets: produce-100b-acks1, produce-100b-acksall,
    /// produce-1kb-acks1, produce-1kb-acksall, fixed-rate-acks1, fixed-rate-vs-null (B = the
    /// null broker), fixed-rate-acksall,
    /// consume-1kb, e2e. Others are listed as they are.
    #[arg(long = "compare")]
    pub compares: Vec<String>,
    /// Markdown file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// PNG file names (relative to the output's folder) as KEY=FILE, shown under each table.
    #[arg(long = "figure")]
    pub figures: Vec<String>,
    /// Free text put under the title (how the brokers were run).
    #[arg(long, default_value = "")]
    pub setup: String,
}

fn kv(items: &[String]) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("{s}: expected KEY=VALUE"))
        })
        .collect()
}

/// A figure of the limits JSON by its path (`null.fixed_rate_p99_ms`); null/absent = None.
fn limit(limits: &serde_json::Value, path: &str) -> Option<f64> {
    path.split('.')
        .try_fold(limits, |v, k| v.get(k))?
        .as_f64()
        .filter(|v| v.is_finite())
}

fn row_of(report: &CompareReport, mode: Mode, key: &str) -> Option<SummaryRow> {
    report
        .results
        .iter()
        .find(|r| r.mode == mode)?
        .summary
        .get(key)
        .cloned()
}

fn pct(part: Option<f64>, whole: Option<f64>) -> String {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0.0 => format!("{:.0}%", 100.0 * p / w),
        _ => "n/a".into(),
    }
}

fn times(part: Option<f64>, whole: Option<f64>) -> String {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0.0 => format!("{:.2}x", p / w),
        _ => "n/a".into(),
    }
}

/// A target's verdict line.
struct Verdict {
    target: String,
    measured: String,
    ok: Option<bool>,
    gap: String,
}

/// CPU model, cores, memory, kernel and load average, for a results file's header.
pub fn machine_info() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{cpu}, {cores} cores available, {mem_gib:.0} GiB RAM, Linux {}; load average when this file was written: {} (1, 5, 15 min)",
        kernel.trim(),
        load.join(" ")
    )
}

/// Writes RESULTS.md.
pub fn results(args: &ResultsArgs) -> Result<()> {
    let limits: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&args.limits)
            .with_context(|| format!("reading {}", args.limits.display()))?,
    )?;
    let mut reports: Vec<(String, CompareReport)> = Vec::new();
    for (key, path) in kv(&args.compares)? {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        reports.push((
            key,
            serde_json::from_str(&text).with_context(|| format!("parsing {path}"))?,
        ));
    }
    let figures = kv(&args.figures)?;
    let get = |key: &str| reports.iter().find(|(k, _)| k == key).map(|(_, r)| r);
    let (a_name, b_name) = reports
        .first()
        .map(|(_, r)| (r.a_name.clone(), r.b_name.clone()))
        .unwrap_or_else(|| ("A".into(), "B".into()));
    let b_is_tansu = b_name.to_lowercase().contains("tansu");

    let mut md = String::new();
    md.push_str("# Benchmark results\n\n");
    md.push_str("Generated by `scripts/bench-results.sh` (do not edit by hand; rerun it).\n\n");
    md.push_str(&format!("- Machine: {}\n", machine_info()));
    md.push_str(&format!(
        "- Date: {}\n",
        perf::output::rfc3339(SystemTime::now())
    ));
    if !args.setup.is_empty() {
        md.push_str(&format!("- Setup: {}\n", args.setup));
    }
    md.push_str(&format!(
        "- Each comparison alternates {a_name} and {b_name} (A B A B ...) for {} rounds on this one machine; tables show each metric's median over the rounds and the ratio {a_name}/{b_name} of the medians.\n",
        reports.first().map_or(0, |(_, r)| r.rounds)
    ));
    md.push_str("- Latency is from the record's intended send time to its acknowledgement (produce) or consumption (e2e), so queueing in the client counts. MiB = 2^20 bytes of record payload. Broker CPU is user+system time of the broker process (`/proc/<pid>/stat`) over the measured run; **µs/record** divides it by records, which equals µs per Produce request when requests carry one record (see the fixed-rate section for the measured records per request). Client CPU is the load generator's own.\n\n");

    // Verdicts first: the reader's question.
    let mut verdicts: Vec<Verdict> = Vec::new();
    let vs_b = |key: &str,
                mode: Mode,
                metric: &str,
                limit_ratio: f64,
                higher_better: bool,
                what: &str|
     -> Verdict {
        let row = get(key).and_then(|r| row_of(r, mode, metric));
        let target = if higher_better {
            format!("{what}: {a_name} at least {limit_ratio}x {b_name}")
        } else {
            format!("{what}: {a_name} at most {limit_ratio}x {b_name}")
        };
        match row.and_then(|r| r.ratio.map(|ratio| (r, ratio))) {
            None => Verdict {
                target,
                measured: "not measured".into(),
                ok: None,
                gap: String::new(),
            },
            Some((r, ratio)) => {
                let ok = if higher_better {
                    ratio >= limit_ratio
                } else {
                    ratio <= limit_ratio
                };
                let gap = if ok {
                    String::new()
                } else if higher_better {
                    format!(
                        "short by {:.2}x (needs {:.0}% more)",
                        limit_ratio / ratio,
                        100.0 * (limit_ratio / ratio - 1.0)
                    )
                } else {
                    format!(
                        "over by {:.2}x (needs {:.0}% less)",
                        ratio / limit_ratio,
                        100.0 * (1.0 - limit_ratio / ratio)
                    )
                };
                Verdict {
                    target,
                    measured: format!(
                        "{} vs {}: {}x",
                        fmt_num(r.a),
                        fmt_num(r.b),
                        fmt_ratio(Some(ratio))
                    ),
                    ok: Some(ok),
                    gap,
                }
            }
        }
    };
    // The issue states these targets against Tansu. Against another real broker (Apache
    // Kafka, Redpanda...) the same rows are shown with their ratios, for reference, and no
    // verdict; against the null broker they are not measured.
    let b_is_null = b_name.eq_ignore_ascii_case("null");
    if !b_is_null {
        let first = verdicts.len();
        verdicts.push(vs_b(
            "produce-100b-acks1",
            Mode::Produce,
            "broker_cpu_s_per_gib",
            0.25,
            false,
            "broker CPU s/GiB produced (100 B, acks=1)",
        ));
        verdicts.push(vs_b(
            "produce-1kb-acks1",
            Mode::Produce,
            "broker_cpu_s_per_gib",
            0.25,
            false,
            "broker CPU s/GiB produced (1 KiB, acks=1)",
        ));
        verdicts.push(vs_b(
            "consume-1kb",
            Mode::Consume,
            "broker_cpu_s_per_gib",
            0.25,
            false,
            "broker CPU s/GiB fetched (1 KiB)",
        ));
        verdicts.push(vs_b(
            "produce-100b-acks1",
            Mode::Produce,
            "records_per_sec",
            1.5,
            true,
            "produce throughput (100 B, acks=1)",
        ));
        verdicts.push(vs_b(
            "produce-1kb-acks1",
            Mode::Produce,
            "records_per_sec",
            1.5,
            true,
            "produce throughput (1 KiB, acks=1)",
        ));
        verdicts.push(vs_b(
            "produce-100b-acksall",
            Mode::Produce,
            "records_per_sec",
            1.5,
            true,
            "produce throughput (100 B, acks=all)",
        ));
        verdicts.push(vs_b(
            "produce-1kb-acksall",
            Mode::Produce,
            "records_per_sec",
            1.5,
            true,
            "produce throughput (1 KiB, acks=all)",
        ));
        verdicts.push(vs_b(
            "fixed-rate-acks1",
            Mode::Produce,
            "p99_ms",
            0.5,
            false,
            "p99 produce latency at fixed rate (acks=1)",
        ));
        if !b_is_tansu {
            for v in &mut verdicts[first..] {
                v.target = format!(
                    "{} (a target stated against Tansu; B is {b_name}: for reference, no verdict)",
                    v.target
                );
                v.ok = None;
                v.gap = String::new();
            }
        }
    } else {
        verdicts.push(Verdict {
            target: "targets relative to Tansu (CPU/GiB <= 1/4, throughput >= 1.5x, fixed-rate p99 <= 1/2)".into(),
            measured: format!("not measured: B was {b_name}, no real broker was compared"),
            ok: None,
            gap: String::new(),
        });
    }
    {
        let us = get("fixed-rate-acks1")
            .and_then(|r| row_of(r, Mode::Produce, "broker_cpu_us_per_record"))
            .and_then(|r| r.a);
        let per_req = limit(&limits, "null.fixed_rate_records_per_request");
        let target = "broker CPU per single-record request at most 10 µs (fixed-rate run, acks=1)"
            .to_string();
        verdicts.push(match us {
            None => Verdict { target, measured: "not measured".into(), ok: None, gap: String::new() },
            Some(us) => Verdict {
                target,
                measured: format!(
                    "{:.1} µs/record; requests carried {} records each against the null broker with the same client and rate, so about {} µs/request (µs/record is a lower bound of a single-record request's cost)",
                    us,
                    fmt_num(per_req),
                    fmt_num(per_req.map(|r| r.max(1.0) * us))
                ),
                // Under 10 µs/record proves nothing about a single-record request when the
                // requests carried several records: then the verdict is left open.
                ok: if us > 10.0 {
                    Some(false)
                } else if per_req.is_some_and(|r| r <= 1.2) {
                    Some(true)
                } else {
                    None
                },
                gap: if us <= 10.0 { String::new() } else { format!("over by {:.1} µs ({:.1}x)", us - 10.0, us / 10.0) },
            },
        });
    }
    {
        // Preferably from the comparison of ours with the null broker itself (alternated
        // rounds under the same conditions), else the limits' single null-broker run.
        let paired = get("fixed-rate-vs-null").and_then(|r| row_of(r, Mode::Produce, "p99_ms"));
        let (p99, null, how) = match paired {
            Some(row) if row.a.is_some() && row.b.is_some() => (
                row.a,
                row.b,
                "medians of `fixed-rate-vs-null`, alternated rounds",
            ),
            _ => (
                get("fixed-rate-acks1")
                    .and_then(|r| row_of(r, Mode::Produce, "p99_ms"))
                    .and_then(|r| r.a),
                limit(&limits, "null.fixed_rate_p99_ms"),
                "`fixed-rate-acks1` against the limits' one null-broker run",
            ),
        };
        let target =
            "p99 produce latency at fixed rate (acks=1) within 150 µs of the null broker's"
                .to_string();
        verdicts.push(match (p99, null) {
            (Some(p), Some(n)) => {
                let over_us = (p - n) * 1000.0;
                Verdict {
                    target,
                    measured: format!(
                        "{} ms vs null broker {} ms: {:+.0} µs ({how})",
                        fmt_num(Some(p)),
                        fmt_num(Some(n)),
                        over_us
                    ),
                    ok: Some(over_us <= 150.0),
                    gap: if over_us <= 150.0 {
                        String::new()
                    } else {
                        format!("over by {:.0} µs", over_us - 150.0)
                    },
                }
            }
            _ => Verdict {
                target,
                measured: "not measured".into(),
                ok: None,
                gap: String::new(),
            },
        });
    }
    for (key, what) in [
        ("fixed-rate-acksall", "fixed rate"),
        ("produce-100b-acksall", "max rate, 100 B"),
    ] {
        let p99 = get(key)
            .and_then(|r| row_of(r, Mode::Produce, "p99_ms"))
            .and_then(|r| r.a);
        let sync = limit(&limits, "fdatasync_4k_p99_ms");
        let target = format!("acks=all p99 ({what}) at most 1.5x the disk's 4 KiB fdatasync p99");
        verdicts.push(match (p99, sync) {
            (Some(p), Some(s)) => Verdict {
                target,
                measured: format!(
                    "{} ms vs fdatasync p99 {} ms: {:.2}x",
                    fmt_num(Some(p)),
                    fmt_num(Some(s)),
                    p / s
                ),
                ok: Some(p <= 1.5 * s),
                gap: if p <= 1.5 * s {
                    String::new()
                } else {
                    format!(
                        "over by {} ms ({:.2}x the allowance)",
                        fmt_num(Some(p - 1.5 * s)),
                        p / (1.5 * s)
                    )
                },
            },
            _ => Verdict {
                target,
                measured: "not measured".into(),
                ok: None,
                gap: String::new(),
            },
        });
    }
    md.push_str("## Targets\n\n| target | measured | met? | shortfall |\n|---|---|---|---|\n");
    for v in &verdicts {
        let ok = match v.ok {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "open",
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            v.target, v.measured, ok, v.gap
        ));
    }
    let failed: Vec<&Verdict> = verdicts.iter().filter(|v| v.ok == Some(false)).collect();
    md.push('\n');
    if failed.is_empty() {
        md.push_str(&format!(
            "Every measured target is met ({} not measured).\n\n",
            verdicts.iter().filter(|v| v.ok.is_none()).count()
        ));
    } else {
        md.push_str(&format!("**Where {a_name} falls short:**\n\n"));
        for v in failed {
            md.push_str(&format!("- {}: {}; {}.\n", v.target, v.measured, v.gap));
        }
        md.push('\n');
    }
    let open: Vec<&Verdict> = verdicts.iter().filter(|v| v.ok.is_none()).collect();
    if !open.is_empty() {
        md.push_str("**Open (not measured, or not established by these runs):**\n\n");
        for v in open {
            md.push_str(&format!("- {}: {}.\n", v.target, v.measured));
        }
        md.push('\n');
    }

    md.push_str("## This machine's limits (`bench limits`)\n\n");
    md.push_str("| measure | value | unit |\n|---|---:|---|\n");
    let limits_rows: Vec<(&str, &str, &str)> = vec![
        ("tcp_loopback_mib_s", "loopback TCP, 1 stream", "MiB/s"),
        ("tcp_send_cpu_s_per_gib", "loopback TCP sender CPU", "s/GiB"),
        (
            "tcp_recv_cpu_s_per_gib",
            "loopback TCP receiver CPU",
            "s/GiB",
        ),
        ("fdatasync_4k_p50_ms", "4 KiB write + fdatasync p50", "ms"),
        ("fdatasync_4k_p99_ms", "4 KiB write + fdatasync p99", "ms"),
        (
            "fdatasync_4k_p99_9_ms",
            "4 KiB write + fdatasync p99.9",
            "ms",
        ),
        ("disk_write_mib_s", "buffered writes + 1 fdatasync", "MiB/s"),
        ("aes128gcm_cpu_s_per_gib", "AES-128-GCM seal CPU", "s/GiB"),
        ("sendfile_mib_s", "sendfile page cache -> loopback", "MiB/s"),
        ("sendfile_cpu_s_per_gib", "sendfile sender CPU", "s/GiB"),
        (
            "null.produce_100b_records_s",
            "null broker: produce 100 B, max rate",
            "records/s",
        ),
        (
            "null.produce_100b_mib_s",
            "null broker: produce 100 B, max rate",
            "MiB/s",
        ),
        (
            "null.produce_100b_p99_ms",
            "null broker: produce 100 B, max rate, p99",
            "ms",
        ),
        (
            "null.produce_100b_broker_cpu_us_per_record",
            "null broker: CPU per record",
            "µs/record",
        ),
        (
            "null.produce_100b_client_cpu_s_per_gib",
            "null broker: producer client CPU",
            "s/GiB",
        ),
        (
            "null.fixed_rate_p50_ms",
            "null broker: produce 100 B at fixed rate, p50",
            "ms",
        ),
        (
            "null.fixed_rate_p99_ms",
            "null broker: produce 100 B at fixed rate, p99",
            "ms",
        ),
        (
            "null.fixed_rate_p99_9_ms",
            "null broker: produce 100 B at fixed rate, p99.9",
            "ms",
        ),
        (
            "null.fixed_rate_records_per_request",
            "null broker: records per Produce request at fixed rate",
            "records",
        ),
        (
            "null.fixed_rate_broker_cpu_us_per_request",
            "null broker: CPU per Produce request at fixed rate",
            "µs/request",
        ),
        (
            "null.consume_1kb_mib_s",
            "null broker: consume 1 KiB",
            "MiB/s",
        ),
        (
            "null.consume_1kb_client_cpu_s_per_gib",
            "null broker: consumer client CPU",
            "s/GiB",
        ),
    ];
    for (key, label, unit) in limits_rows {
        md.push_str(&format!(
            "| {label} | {} | {unit} |\n",
            fmt_num(limit(&limits, key))
        ));
    }
    let client = limits
        .get("null")
        .and_then(|n| n.get("client"))
        .and_then(|c| c.as_str())
        .unwrap_or("?");
    let latency_client = limits
        .get("null")
        .and_then(|n| n.get("latency_client"))
        .and_then(|c| c.as_str())
        .unwrap_or(client);
    let fixed_rate = limit(&limits, "null.fixed_rate").unwrap_or(0.0);
    md.push_str(&format!(
        "\nNull-broker runs use the {client} client (the fixed-rate run: {latency_client}), acks=1, one partition, linger.ms=0 at the fixed rate of {} records/s. `bench null-broker` stores nothing, so these are the client's and the protocol's ceilings on this machine. n/a: the run did not finish within its deadline.\n\n",
        fmt_num(Some(fixed_rate))
    ));

    md.push_str("## Comparisons\n\n");
    for (key, report) in &reports {
        // This comparison's names (fixed-rate-vs-null has the null broker as B).
        let (a_name, b_name) = (&report.a_name, &report.b_name);
        md.push_str(&format!("### {} (`{key}`)\n\n", report.title));
        let w = &report.workload;
        md.push_str(&format!(
            "Workload `{}`: {} topic(s) x {} partition(s), {} B records, {} records/run, rate {}, client {}, producer {}.\n\n",
            w.name,
            w.topics,
            w.partitions_per_topic,
            w.record_size,
            w.num_records().unwrap_or(0),
            if w.rate > 0.0 { format!("{} records/s", fmt_num(Some(w.rate))) } else { "max".into() },
            w.client,
            props_line(&w.producer_props())
        ));
        for r in &report.results {
            md.push_str(&r.table);
            md.push('\n');
            let errors: u64 = r.a_runs.iter().chain(&r.b_runs).map(|m| m.errors).sum();
            if errors > 0 {
                md.push_str(&format!("Errors over all rounds: {errors} (records failed, consumer timeouts or poll errors).\n\n"));
            }
            // Set against the limits.
            let a = |metric: &str| r.summary.get(metric).and_then(|row| row.a);
            let b = |metric: &str| r.summary.get(metric).and_then(|row| row.b);
            let mut notes: Vec<String> = Vec::new();
            match r.mode {
                Mode::Produce => {
                    if w.rate <= 0.0 {
                        notes.push(format!(
                            "MiB/s as a share of loopback TCP ({} MiB/s): {a_name} {}, {b_name} {}",
                            fmt_num(limit(&limits, "tcp_loopback_mib_s")),
                            pct(a("mib_per_sec"), limit(&limits, "tcp_loopback_mib_s")),
                            pct(b("mib_per_sec"), limit(&limits, "tcp_loopback_mib_s"))
                        ));
                    }
                    if w.record_size == 100 && w.rate <= 0.0 {
                        notes.push(format!(
                            "records/s as a share of the null broker's ({} records/s, 100 B, acks=1): {a_name} {}, {b_name} {}",
                            fmt_num(limit(&limits, "null.produce_100b_records_s")),
                            pct(a("records_per_sec"), limit(&limits, "null.produce_100b_records_s")),
                            pct(b("records_per_sec"), limit(&limits, "null.produce_100b_records_s"))
                        ));
                    }
                    if w.rate <= 0.0 {
                        notes.push(format!(
                            "broker CPU s/GiB vs loopback TCP receive ({} s/GiB): {a_name} {}, {b_name} {}",
                            fmt_num(limit(&limits, "tcp_recv_cpu_s_per_gib")),
                            times(a("broker_cpu_s_per_gib"), limit(&limits, "tcp_recv_cpu_s_per_gib")),
                            times(b("broker_cpu_s_per_gib"), limit(&limits, "tcp_recv_cpu_s_per_gib"))
                        ));
                    }
                    let acks_all = w
                        .producer_props()
                        .iter()
                        .any(|(k, v)| k == "acks" && (v == "all" || v == "-1"));
                    if acks_all {
                        notes.push(format!(
                            "p99 vs 4 KiB fdatasync p99 ({} ms): {a_name} {}, {b_name} {}",
                            fmt_num(limit(&limits, "fdatasync_4k_p99_ms")),
                            times(a("p99_ms"), limit(&limits, "fdatasync_4k_p99_ms")),
                            times(b("p99_ms"), limit(&limits, "fdatasync_4k_p99_ms"))
                        ));
                    }
                    if w.rate > 0.0 {
                        notes.push(format!(
                            "p99 vs the null broker's at {} records/s ({} ms): {a_name} {}, {b_name} {}",
                            fmt_num(limit(&limits, "null.fixed_rate")),
                            fmt_num(limit(&limits, "null.fixed_rate_p99_ms")),
                            diff_us(a("p99_ms"), limit(&limits, "null.fixed_rate_p99_ms")),
                            diff_us(b("p99_ms"), limit(&limits, "null.fixed_rate_p99_ms"))
                        ));
                    }
                }
                Mode::Consume => {
                    notes.push(format!(
                        "MiB/s as a share of loopback TCP ({} MiB/s): {a_name} {}, {b_name} {}; of the null broker's consume ({} MiB/s): {a_name} {}, {b_name} {}",
                        fmt_num(limit(&limits, "tcp_loopback_mib_s")),
                        pct(a("mib_per_sec"), limit(&limits, "tcp_loopback_mib_s")),
                        pct(b("mib_per_sec"), limit(&limits, "tcp_loopback_mib_s")),
                        fmt_num(limit(&limits, "null.consume_1kb_mib_s")),
                        pct(a("mib_per_sec"), limit(&limits, "null.consume_1kb_mib_s")),
                        pct(b("mib_per_sec"), limit(&limits, "null.consume_1kb_mib_s"))
                    ));
                    notes.push(format!(
                        "broker CPU s/GiB fetched vs a bare sendfile ({} s/GiB) and a copying TCP send ({} s/GiB): {a_name} {} / {}, {b_name} {} / {}",
                        fmt_num(limit(&limits, "sendfile_cpu_s_per_gib")),
                        fmt_num(limit(&limits, "tcp_send_cpu_s_per_gib")),
                        times(a("broker_cpu_s_per_gib"), limit(&limits, "sendfile_cpu_s_per_gib")),
                        times(a("broker_cpu_s_per_gib"), limit(&limits, "tcp_send_cpu_s_per_gib")),
                        times(b("broker_cpu_s_per_gib"), limit(&limits, "sendfile_cpu_s_per_gib")),
                        times(b("broker_cpu_s_per_gib"), limit(&limits, "tcp_send_cpu_s_per_gib"))
                    ));
                }
                Mode::E2e => {}
            }
            for n in notes {
                md.push_str(&format!("- {n}\n"));
            }
            md.push('\n');
        }
        if let Some((_, file)) = figures.iter().find(|(k, _)| k == key) {
            md.push_str(&format!("![{}]({file})\n\n", report.title));
        }
    }
    if let Some(dir) = args.out.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    std::fs::write(&args.out, md).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}

fn diff_us(value_ms: Option<f64>, base_ms: Option<f64>) -> String {
    match (value_ms, base_ms) {
        (Some(v), Some(b)) => format!("{:+.0} µs", (v - b) * 1000.0),
        _ => "n/a".into(),
    }
}
