//! `bench latency-sweep`: fixed-rate produce (acks=1 and acks=all) and end-to-end latency
//! (produce -> consume) at several offered rates, against several brokers in one run, so that
//! their figures can be compared as ratios with the machine's noise shared.
//!
//! Per target, mode and rate it reports the achieved rate, latency p50/p99/p99.9 (from each
//! record's intended send time, so falling behind the schedule counts), the broker's CPU per
//! Produce request and per record, Produce requests/s and records per request.
//!
//! Targets:
//! - **ours**: our broker, started by the sweep from `--broker-bin` with `--broker-config`
//!   keys (one broker per `--variant`, e.g. `2shards:num.shards=2`), or given by `--broker`
//!   address (pid from `--broker-pid` or its listening port);
//! - **null**: the null broker ([`crate::null_broker`]), in-process (its threads' CPU is its
//!   CPU) or given by `--null-broker ADDR` (a `bench null-broker` process, pid by port). It
//!   stores nothing, so e2e rows are skipped for it;
//! - **others**: `--other NAME=ADDR` (e.g. `tansu=127.0.0.1:19192`), pid by port
//!   ([`cpu::resolve_broker_pid`]).
//!
//! Single-record requests: with the native engine (default) every run uses `linger.ms=0`
//! and `batch.size=1` (the engine's floor, 128 bytes, smaller than one record of
//! `--record-size` >= [`MIN_SINGLE_RECORD_SIZE`]), so a batch holds one record and a
//! request one batch (one partition): records per request is 1 unless the client had to
//! queue, and the table shows it (the native engine counts the requests it writes). With
//! librdkafka: `linger.ms=0`, `batch.num.messages=1`; requests are not counted, so CPU per
//! request is CPU per record there.
//!
//! Rates are interleaved: for each rate and mode every target runs once before the next, so
//! that a slow drift of the machine touches every target alike.
//!
//! `--connections N` runs N producers (N connections) at rate/N each into the same topic;
//! their latency percentiles are merged as the worst producer's (an upper bound: reports
//! carry percentiles, not histograms). E2e runs use one producer and one consumer.
//!
//! Idle CPU (`--idle-seconds`): after start-up settles, every target with a process is
//! sampled with no client connected, reported as % of one core.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::broker_process::{default_broker_bin, exit_reason, free_ports, listening, settle};
use crate::cpu::{self, BrokerCpu, CpuSampler};
use crate::engine::{self, ClientKind, Props};
use crate::native::producer::PRODUCE_REQUESTS_SENT;
use crate::null_broker::{NullBroker, NullBrokerArgs};
use crate::perf;

/// Smallest record for which the native engine's smallest batch holds exactly one record.
pub const MIN_SINGLE_RECORD_SIZE: usize = 64;
/// How long our broker may take to listen after start.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long our broker may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long an e2e point's consumer waits for records after the producer ends.
const E2E_CONSUMER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a target may take to acknowledge the topic's creation before the point is run.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(30);

/// What a point measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SweepMode {
    /// Fixed-rate produce, acks=1: latency to the acknowledgement.
    Acks1,
    /// Fixed-rate produce, acks=all: latency to the acknowledgement.
    AcksAll,
    /// Fixed-rate produce (acks=1) consumed by a consumer of the same process: latency to
    /// consumption.
    E2e,
}

impl SweepMode {
    pub fn name(self) -> &'static str {
        match self {
            SweepMode::Acks1 => "acks=1",
            SweepMode::AcksAll => "acks=all",
            SweepMode::E2e => "e2e",
        }
    }

    fn acks(self) -> &'static str {
        match self {
            SweepMode::AcksAll => "all",
            SweepMode::Acks1 | SweepMode::E2e => "1",
        }
    }
}

/// `bench latency-sweep` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencySweepArgs {
    /// Offered rates, records/s, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000,200000")]
    pub rates: Vec<f64>,
    /// Seconds each point runs (records = rate x duration).
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// A point's client stops sending after this many seconds (and waits as long again at
    /// most for acknowledgements): a broker that stalls or falls far behind ends the point
    /// with fewer records, noted. Default: 3 x --duration + 5.
    #[arg(long)]
    pub point_timeout: Option<f64>,
    /// Modes, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "acks1,acks-all,e2e"
    )]
    pub modes: Vec<SweepMode>,
    /// Record value bytes (e2e embeds its 16-byte header in them).
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// Partitions of each point's topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Producers (connections) per produce point, each at rate/N.
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    /// Client engine.
    #[arg(long, value_enum, default_value_t = ClientKind::Native)]
    pub client: ClientKind,
    /// Let the client batch (linger.ms=0, default batch size) instead of one record per request.
    #[arg(long)]
    pub batched: bool,
    /// Extra producer properties (Kafka names), KEY=VALUE, repeatable; win over the sweep's.
    #[arg(long = "producer-prop")]
    pub producer_props: Vec<String>,
    /// Start our broker from this binary (default: `broker` beside this `bench`, when no
    /// --broker is given).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// A key=value for every broker the sweep starts (repeatable), e.g. num.shards=1,
    /// log.flush.policy=ack, connection.handoff.enable=false.
    #[arg(long = "broker-config")]
    pub broker_config: Vec<String>,
    /// A broker of ours to start: NAME:key=value[,key=value...] (repeatable), named
    /// `ours-NAME`, with --broker-config then its own keys (later keys win). Without any,
    /// one broker `ours` with --broker-config.
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// Our broker already running at this address (nothing is started).
    #[arg(long)]
    pub broker: Option<String>,
    /// Pid of the --broker (default: the process listening on its port).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Do not measure our broker.
    #[arg(long)]
    pub no_ours: bool,
    /// Use the null broker at this address (a `bench null-broker` process) instead of an
    /// in-process one.
    #[arg(long)]
    pub null_broker: Option<String>,
    /// Do not measure the null broker.
    #[arg(long)]
    pub no_null: bool,
    /// Another broker: NAME=ADDR (repeatable), e.g. tansu=127.0.0.1:19192.
    #[arg(long = "other")]
    pub others: Vec<String>,
    /// Seconds of idle CPU measurement per target process (0: none).
    #[arg(long, default_value_t = 3.0)]
    pub idle_seconds: f64,
    /// Working directory for the brokers started (default: a temporary one, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the Markdown table here (it is printed too).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the figure (p99 and broker CPU per request against rate) here (PNG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Title of the table and figure.
    #[arg(long)]
    pub title: Option<String>,
    /// Progress on stderr.
    #[arg(long)]
    pub verbose: bool,
}

impl Default for LatencySweepArgs {
    fn default() -> Self {
        LatencySweepArgs {
            rates: vec![1000.0, 10_000.0, 50_000.0, 200_000.0],
            duration: 3.0,
            point_timeout: None,
            modes: vec![SweepMode::Acks1, SweepMode::AcksAll, SweepMode::E2e],
            record_size: 100,
            partitions: 1,
            connections: 1,
            client: ClientKind::Native,
            batched: false,
            producer_props: Vec::new(),
            broker_bin: None,
            broker_config: Vec::new(),
            variants: Vec::new(),
            broker: None,
            broker_pid: None,
            no_ours: false,
            null_broker: None,
            no_null: false,
            others: Vec::new(),
            idle_seconds: 3.0,
            dir: None,
            markdown: None,
            json: None,
            plot: None,
            title: None,
            verbose: false,
        }
    }
}

/// What kind of broker a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Ours,
    Null,
    Other,
}

/// A broker measured, as reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    pub kind: TargetKind,
    pub bootstrap: String,
    /// Its process (None: in-process or not found).
    pub pid: Option<u32>,
    /// The keys it was started with (ours, started by the sweep).
    pub config: Vec<String>,
}

/// Idle CPU of one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Idle {
    pub target: String,
    pub seconds: f64,
    /// CPU seconds over wall seconds, in % of one core.
    pub percent_of_core: f64,
}

/// One measured (or skipped) point.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Point {
    pub target: String,
    pub mode: Option<SweepMode>,
    /// Offered records/s.
    pub rate: f64,
    pub records: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub achieved_rate: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_9_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub broker_cpu_s: Option<f64>,
    /// Broker CPU over Produce requests (over records when requests are not counted).
    pub broker_cpu_us_per_request: Option<f64>,
    pub broker_cpu_us_per_record: Option<f64>,
    /// Broker cores busy on average over the point.
    pub broker_cores: Option<f64>,
    /// Produce requests the client wrote (native engine); None when not counted.
    pub requests: Option<u64>,
    pub requests_per_s: Option<f64>,
    pub records_per_request: Option<f64>,
    pub skipped: bool,
    /// Why a point was skipped or failed, or what to know about it.
    pub note: String,
}

/// Every figure of a sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepReport {
    pub title: String,
    pub date: String,
    pub machine: String,
    pub client: ClientKind,
    pub record_size: usize,
    pub partitions: i32,
    pub connections: u32,
    pub duration_s: f64,
    pub single_record_requests: bool,
    pub producer_props: Vec<(String, String)>,
    pub targets: Vec<TargetInfo>,
    pub idle: Vec<Idle>,
    pub points: Vec<Point>,
    pub table: String,
}

/// Our broker, started by the sweep; stopped (SIGTERM, then SIGKILL) when dropped.
struct Started {
    child: Child,
    log: PathBuf,
}

impl Started {
    fn start(
        bin: &Path,
        dir: &Path,
        name: &str,
        keys: &[String],
        verbose: bool,
    ) -> Result<(Started, String)> {
        let (port, _) = free_ports()?;
        let addr = format!("127.0.0.1:{port}");
        let data = dir.join(format!("{name}-data"));
        let log = dir.join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log).with_context(|| format!("{}", log.display()))?;
        let mut all = vec![
            format!("listeners=PLAINTEXT://{addr}"),
            format!("log.dirs={}", data.display()),
        ];
        all.extend(keys.iter().cloned());
        let mut cmd = Command::new(bin);
        cmd.arg("start");
        for k in &all {
            cmd.args(["--override", k]);
        }
        if verbose {
            eprintln!(
                "latency-sweep: {} start --override {}",
                bin.display(),
                all.join(" --override ")
            );
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut started = Started { child, log };
        let deadline = Instant::now() + START_TIMEOUT;
        while !listening(&addr) {
            if let Some(status) = started.child.try_wait()? {
                let text = std::fs::read_to_string(&started.log).unwrap_or_default();
                bail!(
                    "{name}: the broker exited ({status}): {}",
                    exit_reason(&text)
                );
            }
            if Instant::now() > deadline {
                bail!("{name}: the broker did not listen on {addr} within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok((started, addr))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // SIGTERM first: the shards print their counters and close their logs.
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A target during the run.
struct Target {
    info: TargetInfo,
    cpu: BrokerCpu,
}

/// `NAME:k=v,k=v` -> (NAME, keys).
pub fn parse_variant(text: &str) -> Result<(String, Vec<String>)> {
    let (name, keys) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("--variant {text}: expected NAME:key=value[,key=value...]"))?;
    let keys: Vec<String> = keys
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    if name.is_empty() || keys.iter().any(|k| !k.contains('=')) {
        bail!("--variant {text}: expected NAME:key=value[,key=value...]");
    }
    Ok((name.to_string(), keys))
}

/// `NAME=ADDR` -> (NAME, ADDR).
pub fn parse_other(text: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((name, addr)) if !name.is_empty() && addr.contains(':') => {
            Ok((name.to_string(), addr.to_string()))
        }
        _ => bail!("--other {text}: expected NAME=HOST:PORT"),
    }
}

/// The producer properties of a point: the sweep's, then `--producer-prop`.
pub fn producer_props(args: &LatencySweepArgs, mode: SweepMode) -> Result<Props> {
    let mut props = Props::new();
    engine::set_prop(&mut props, "acks", mode.acks());
    engine::set_prop(&mut props, "linger.ms", "0");
    if !args.batched {
        match args.client {
            ClientKind::Native => engine::set_prop(&mut props, "batch.size", "1"),
            ClientKind::Librdkafka => engine::set_prop(&mut props, "batch.num.messages", "1"),
        }
    }
    for (k, v) in engine::parse_kv_props(&args.producer_props)? {
        engine::set_prop(&mut props, &k, &v);
    }
    Ok(props)
}

fn unique_topic(target: &str, mode: SweepMode, rate: f64) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let target: String = target
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let mode = match mode {
        SweepMode::Acks1 => "acks1",
        SweepMode::AcksAll => "acksall",
        SweepMode::E2e => "e2e",
    };
    format!(
        "sweep-{target}-{mode}-{}-{}-{ms}",
        rate as u64,
        std::process::id()
    )
}

/// Creates `topic` and waits until a producer's metadata can see it (a broker may answer
/// CreateTopics before the partition takes writes).
fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    let deadline = Instant::now() + TOPIC_TIMEOUT;
    loop {
        match engine::create_topic(bootstrap, topic, partitions) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn opt_pos(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// One produce or e2e point against one target.
fn run_point(args: &LatencySweepArgs, target: &Target, mode: SweepMode, rate: f64) -> Point {
    let mut point = Point {
        target: target.info.name.clone(),
        mode: Some(mode),
        rate,
        ..Default::default()
    };
    if mode == SweepMode::E2e && target.info.kind == TargetKind::Null {
        point.skipped = true;
        point.note = "the null broker stores nothing to consume".into();
        return point;
    }
    match measure_point(args, target, mode, rate, &mut point) {
        Ok(()) => point,
        Err(e) => {
            point.skipped = true;
            point.note = format!("failed: {e:#}");
            eprintln!(
                "latency-sweep: {} {} at {rate} records/s failed: {e:#}",
                target.info.name,
                mode.name()
            );
            point
        }
    }
}

fn measure_point(
    args: &LatencySweepArgs,
    target: &Target,
    mode: SweepMode,
    rate: f64,
    point: &mut Point,
) -> Result<()> {
    let bootstrap = &target.info.bootstrap;
    let topic = unique_topic(&target.info.name, mode, rate);
    create_topic(bootstrap, &topic, args.partitions)?;
    // The topic's creation (partition opened, segment files made) is not the point's cost.
    // (Ours only: another broker that never quite idles would cost settle's timeout each time.)
    if let (Some(pid), TargetKind::Ours) = (target.info.pid, target.info.kind) {
        settle(pid);
    }
    let total = ((rate * args.duration).round() as u64).max(1);
    let props = producer_props(args, mode)?;
    let counted = args.client == ClientKind::Native;
    let requests0 = PRODUCE_REQUESTS_SENT.load(Ordering::Relaxed);
    let max_duration = Duration::from_secs_f64(
        args.point_timeout
            .unwrap_or(args.duration * 3.0 + 5.0)
            .max(args.duration),
    );
    let sampler = CpuSampler::start(target.cpu.clone());
    let (records, errors, elapsed_s, latency) = if mode == SweepMode::E2e {
        let mut opts = perf::E2eOpts::new(bootstrap, &topic, total, args.record_size, rate);
        opts.producer_props = props;
        opts.client = args.client;
        opts.create_topic_partitions = args.partitions;
        opts.quiet = true;
        opts.max_duration = Some(max_duration);
        opts.timeout_ms = E2E_CONSUMER_TIMEOUT.as_millis() as u64;
        let report = perf::run_e2e(&opts)?;
        if report.timed_out {
            point.note = "the consumer timed out before receiving every record".into();
        }
        (
            report.records_received,
            report.send_errors + u64::from(report.timed_out),
            report.elapsed_s,
            report.latency_ms,
        )
    } else {
        let n = u64::from(args.connections.max(1));
        let opts = |i: u64| {
            let mut opts = perf::ProducerOpts::new(
                bootstrap,
                &topic,
                (total / n + u64::from(i < total % n)).max(1),
                args.record_size,
            );
            opts.throughput = rate / n as f64;
            opts.props = props.clone();
            opts.client = args.client;
            opts.quiet = true;
            opts.max_duration = Some(max_duration);
            opts
        };
        let reports = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let opts = opts(i);
                    scope.spawn(move || perf::run_producer(&opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("producer thread panicked"))?)
                .collect::<Result<Vec<_>>>()
        })?;
        if n > 1 {
            point.note = format!("{n} connections; percentiles are the worst connection's");
        }
        let m = crate::compare::merge_producer_reports(&reports);
        let latency = m.latency_ms.clone().unwrap_or_default();
        (m.records, m.errors, m.elapsed_s, latency)
    };
    let usage = sampler.stop();
    let requests = PRODUCE_REQUESTS_SENT.load(Ordering::Relaxed) - requests0;
    let _ = crate::compare::delete_topic(bootstrap, &topic);
    point.records = records;
    point.errors = errors;
    point.elapsed_s = elapsed_s;
    if records == 0 {
        bail!("no record was acknowledged ({errors} errors)");
    }
    point.achieved_rate = (elapsed_s > 0.0).then(|| records as f64 / elapsed_s);
    point.p50_ms = opt_pos(latency.p50);
    point.p99_ms = opt_pos(latency.p99);
    point.p99_9_ms = opt_pos(latency.p99_9);
    point.max_ms = opt_pos(latency.max);
    point.broker_cpu_s = usage.broker_cpu_s;
    point.broker_cores = usage.broker_cores();
    point.broker_cpu_us_per_record = usage.broker_cpu_us_per_request(records);
    if counted && requests > 0 {
        point.requests = Some(requests);
        point.requests_per_s = (elapsed_s > 0.0).then(|| requests as f64 / elapsed_s);
        point.records_per_request = Some(records as f64 / requests as f64);
        point.broker_cpu_us_per_request = usage.broker_cpu_us_per_request(requests);
    } else {
        // Requests not counted (librdkafka): per record, the same at one record a request.
        point.broker_cpu_us_per_request = point.broker_cpu_us_per_record;
    }
    if records + errors < total {
        point.note = format!(
            "the client stopped sending at the point's time limit ({:.0} s): {} of {total} records acknowledged{}",
            max_duration.as_secs_f64(),
            records,
            if point.note.is_empty() { String::new() } else { format!("; {}", point.note) }
        );
    }
    if errors > 0 && point.note.is_empty() {
        point.note = format!("{errors} records failed");
    }
    Ok(())
}

/// CPU of `pid` over `seconds` with no client, in % of one core.
fn idle_percent(pid: u32, seconds: f64) -> Result<f64> {
    let c0 = cpu::process_cpu_seconds(pid)?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let c1 = cpu::process_cpu_seconds(pid)?;
    Ok((c1 - c0) / t0.elapsed().as_secs_f64() * 100.0)
}

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

/// `bench latency-sweep`.
pub fn run(args: &LatencySweepArgs) -> Result<SweepReport> {
    if args.rates.is_empty() || args.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        bail!("--rates: positive records/s expected");
    }
    if !args.duration.is_finite() || args.duration <= 0.0 {
        bail!("--duration must be positive");
    }
    if args.modes.contains(&SweepMode::E2e) && args.record_size < perf::e2e::HEADER_LEN {
        bail!(
            "--record-size must be at least {} for e2e",
            perf::e2e::HEADER_LEN
        );
    }
    if !args.batched
        && args.client == ClientKind::Native
        && args.record_size < MIN_SINGLE_RECORD_SIZE
    {
        bail!(
            "--record-size must be at least {MIN_SINGLE_RECORD_SIZE} for one record per request \
             with the native engine (or pass --batched)"
        );
    }
    for kv in &args.broker_config {
        if !kv.contains('=') {
            bail!("--broker-config {kv}: expected key=value");
        }
    }
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = TempDir::new()?;
            tmp.path.clone()
        }
    };

    let mut targets: Vec<Target> = Vec::new();
    let mut started: Vec<Started> = Vec::new();
    if !args.no_ours {
        if let Some(addr) = &args.broker {
            let pid = cpu::resolve_broker_pid(args.broker_pid, addr);
            targets.push(Target {
                info: TargetInfo {
                    name: "ours".into(),
                    kind: TargetKind::Ours,
                    bootstrap: addr.clone(),
                    pid,
                    config: Vec::new(),
                },
                cpu: pid.into(),
            });
        } else {
            let bin = args.broker_bin.clone().unwrap_or_else(default_broker_bin);
            let mut variants = Vec::new();
            if args.variants.is_empty() {
                variants.push(("ours".to_string(), args.broker_config.clone()));
            }
            for v in &args.variants {
                let (name, keys) = parse_variant(v)?;
                let mut all = args.broker_config.clone();
                all.extend(keys);
                variants.push((format!("ours-{name}"), all));
            }
            for (name, keys) in variants {
                let (broker, addr) = Started::start(&bin, &dir, &name, &keys, args.verbose)?;
                let pid = broker.pid();
                started.push(broker);
                targets.push(Target {
                    info: TargetInfo {
                        name,
                        kind: TargetKind::Ours,
                        bootstrap: addr,
                        pid: Some(pid),
                        config: keys,
                    },
                    cpu: pid.into(),
                });
            }
        }
    }
    let mut null_broker = None;
    if !args.no_null {
        match &args.null_broker {
            Some(addr) => {
                let pid = cpu::resolve_broker_pid(None, addr);
                targets.push(Target {
                    info: TargetInfo {
                        name: "null".into(),
                        kind: TargetKind::Null,
                        bootstrap: addr.clone(),
                        pid,
                        config: Vec::new(),
                    },
                    cpu: pid.into(),
                });
            }
            None => {
                let broker = NullBroker::start(&NullBrokerArgs {
                    record_size: args.record_size,
                    partitions: args.partitions,
                    ..Default::default()
                })?;
                targets.push(Target {
                    info: TargetInfo {
                        name: "null".into(),
                        kind: TargetKind::Null,
                        bootstrap: broker.addr().to_string(),
                        pid: None,
                        config: Vec::new(),
                    },
                    cpu: broker.cpu_source(),
                });
                null_broker = Some(broker);
            }
        }
    }
    for o in &args.others {
        let (name, addr) = parse_other(o)?;
        let pid = cpu::resolve_broker_pid(None, &addr);
        targets.push(Target {
            info: TargetInfo {
                name,
                kind: TargetKind::Other,
                bootstrap: addr,
                pid,
                config: Vec::new(),
            },
            cpu: pid.into(),
        });
    }
    if targets.is_empty() {
        bail!("nothing to measure: every target was turned off");
    }

    // Start-up work (shards opening, timers) done before anything is measured.
    for t in &targets {
        if let Some(pid) = t.info.pid {
            settle(pid);
        }
    }
    let mut idle = Vec::new();
    if args.idle_seconds > 0.0 {
        for t in &targets {
            let Some(pid) = t.info.pid else { continue };
            if args.verbose {
                eprintln!("latency-sweep: idle CPU of {} ...", t.info.name);
            }
            match idle_percent(pid, args.idle_seconds) {
                Ok(percent) => idle.push(Idle {
                    target: t.info.name.clone(),
                    seconds: args.idle_seconds,
                    percent_of_core: percent,
                }),
                Err(e) => eprintln!("latency-sweep: idle CPU of {}: {e:#}", t.info.name),
            }
        }
    }

    let mut points = Vec::new();
    for &rate in &args.rates {
        for &mode in &args.modes {
            for t in &targets {
                if args.verbose {
                    eprintln!(
                        "latency-sweep: {} {} at {rate} records/s ...",
                        t.info.name,
                        mode.name()
                    );
                }
                let point = run_point(args, t, mode, rate);
                if args.verbose && !point.skipped {
                    eprintln!(
                        "latency-sweep:   {} records/s, p99 {} ms, {} µs/request",
                        cell(point.achieved_rate, 0),
                        cell(point.p99_ms, 3),
                        cell(point.broker_cpu_us_per_request, 1)
                    );
                }
                points.push(point);
            }
        }
    }
    if let Some(mut b) = null_broker {
        b.stop();
    }
    drop(started);

    let mut report = SweepReport {
        title: args
            .title
            .clone()
            .unwrap_or_else(|| "bench latency-sweep".to_string()),
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        machine: crate::compare::machine_info(),
        client: args.client,
        record_size: args.record_size,
        partitions: args.partitions,
        connections: args.connections.max(1),
        duration_s: args.duration,
        single_record_requests: !args.batched,
        producer_props: producer_props(args, SweepMode::Acks1)?,
        targets: targets.into_iter().map(|t| t.info).collect(),
        idle,
        points,
        table: String::new(),
    };
    report.table = markdown(&report);
    println!("{}", report.table);
    if let Some(path) = &args.markdown {
        std::fs::write(path, &report.table)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.json {
        perf::output::write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        plot(&report, path)?;
    }
    Ok(report)
}

/// A directory removed when dropped (the brokers' data and logs of a run without --dir).
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> Result<TempDir> {
        let path = std::env::temp_dir().join(format!(
            "bench-latency-sweep-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(points: Vec<Point>) -> SweepReport {
        SweepReport {
            title: "t".into(),
            date: "d".into(),
            machine: "m".into(),
            client: ClientKind::Native,
            record_size: 100,
            partitions: 1,
            connections: 1,
            duration_s: 1.0,
            single_record_requests: true,
            producer_props: vec![],
            targets: vec![TargetInfo {
                name: "ours".into(),
                kind: TargetKind::Ours,
                bootstrap: "127.0.0.1:1".into(),
                pid: Some(7),
                config: vec!["num.shards=2".into()],
            }],
            idle: vec![Idle {
                target: "ours".into(),
                seconds: 2.0,
                percent_of_core: 0.25,
            }],
            points,
            table: String::new(),
        }
    }

    fn measured() -> Point {
        Point {
            target: "ours".into(),
            mode: Some(SweepMode::Acks1),
            rate: 10_000.0,
            records: 30_000,
            elapsed_s: 3.0,
            achieved_rate: Some(9_999.6),
            p50_ms: Some(0.05),
            p99_ms: Some(0.1234),
            p99_9_ms: Some(1.5),
            max_ms: Some(3.0),
            broker_cpu_s: Some(0.3),
            broker_cpu_us_per_request: Some(10.04),
            broker_cpu_us_per_record: Some(10.04),
            broker_cores: Some(0.1),
            requests: Some(30_000),
            requests_per_s: Some(10_000.0),
            records_per_request: Some(1.0),
            ..Default::default()
        }
    }

    #[test]
    fn table_rows_and_cells() {
        let skipped = Point {
            target: "null".into(),
            mode: Some(SweepMode::E2e),
            rate: 1000.0,
            skipped: true,
            note: "the null broker stores nothing | to consume".into(),
            ..Default::default()
        };
        let no_cpu = Point {
            broker_cpu_us_per_request: None,
            mode: Some(SweepMode::AcksAll),
            note: "2 records failed".into(),
            ..measured()
        };
        let text = markdown(&report(vec![measured(), skipped, no_cpu]));
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| ours") || l.starts_with("| null"))
            .collect();
        assert_eq!(rows.len(), 4, "{text}");
        assert_eq!(
            rows[0],
            "| ours | acks=1 | 10000 | 10000 | 0.050 | 0.123 | 1.500 | 10.0 | 10.0 | 10000 | 1.00 |"
        );
        // Skipped: the reason in place of figures, no stray column separator.
        assert_eq!(rows[1].matches('|').count(), 12, "{}", rows[1]);
        assert!(rows[1].contains("stores nothing / to consume"));
        assert!(rows[2].contains("| acks=all |") && rows[2].contains("| n/a |"));
        assert_eq!(rows[3], "| ours | 0.25 | 2.0 |");
        assert!(text.contains("- ours acks=all at 10000/s: 2 records failed"));
        assert!(text.contains("keys: `num.shards=2`"));
        assert!(text.contains(HEADER));
        assert_eq!(cell(Some(f64::NAN), 1), "n/a");
    }

    #[test]
    fn json_round_trips_with_nulls() {
        let r = report(vec![measured(), Point::default()]);
        let text = serde_json::to_string(&r).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["points"][0]["mode"], "acks1");
        assert_eq!(v["points"][0]["p99_ms"], 0.1234);
        assert!(v["points"][1]["p99_ms"].is_null());
        assert_eq!(v["targets"][0]["kind"], "ours");
        assert_eq!(v["idle"][0]["percent_of_core"], 0.25);
        let back: SweepReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.points, r.points);
    }

    #[test]
    fn parses_flags() {
        assert_eq!(
            parse_variant("2shards:num.shards=2, flush.policy=ack").unwrap(),
            (
                "2shards".to_string(),
                vec!["num.shards=2".to_string(), "flush.policy=ack".to_string()]
            )
        );
        assert!(parse_variant("noval").is_err());
        assert!(parse_variant("x:novalue").is_err());
        assert_eq!(
            parse_other("tansu=127.0.0.1:19192").unwrap(),
            ("tansu".to_string(), "127.0.0.1:19192".to_string())
        );
        assert!(parse_other("tansu").is_err());
        let args = LatencySweepArgs {
            producer_props: vec!["acks=0".into()],
            ..Default::default()
        };
        let props = producer_props(&args, SweepMode::AcksAll).unwrap();
        assert_eq!(engine::get_prop(&props, "acks"), Some("0"));
        assert_eq!(engine::get_prop(&props, "batch.size"), Some("1"));
        let batched = LatencySweepArgs {
            batched: true,
            ..Default::default()
        };
        let props = producer_props(&batched, SweepMode::AcksAll).unwrap();
        assert_eq!(engine::get_prop(&props, "acks"), Some("all"));
        assert_eq!(engine::get_prop(&props, "batch.size"), None);
    }
}
