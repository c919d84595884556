//! `bench e2e-latency`: end-to-end latency (producer -> broker -> consumer), after Kafka's
//! `EndToEndLatency` tool, but at a fixed rate instead of one record at a time.
//!
//! A producer sends `--num-records` records at `--throughput` records/sec; record `i` is
//! intended at `start + i / throughput` and carries that intended time in its first bytes:
//! `[0..8)` nanoseconds since the run's epoch (a process-local monotonic clock), `[8..12)`
//! a run id, `[12..16)` the sequence number (all little-endian; `--record-size` >= 16). A
//! consumer thread in the same process, assigned to every partition from the earliest offset
//! before the producer starts, records `now - intended` for each record of this run (records
//! of other runs in the topic are skipped: use a fresh topic, as a backlog delays the first
//! fetches).
//!
//! Output, as Kafka's tool prints it: `<seq>\t<latency ms>` every 1000 records, then
//! `Avg latency: %.4f ms` and `Percentiles: 50th = %d, 99th = %d, 99.9th = %d` (whole ms,
//! truncated); then our line at microsecond precision:
//! `Percentiles (ms): 50th = %.3f, 95th = %.3f, 99th = %.3f, 99.9th = %.3f, 99.99th = %.3f, max = %.3f`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

use super::histogram::{LatencyHistogram, LatencySummary};
use super::output::{java_fixed, mb, unix_ms, write_json, Timestamp};
use super::rate::{Pacer, SeriesPoint, ThroughputSeries};
use crate::engine::{self, ClientKind, ConsumedRecord, Props, SendError};

/// Bytes of the value taken by the embedded header (intended ns, run id, sequence).
pub const HEADER_LEN: usize = 16;

#[derive(clap::Args, Debug, Clone)]
pub struct E2eArgs {
    /// The server(s) to connect to.
    #[arg(long = "bootstrap-server")]
    pub bootstrap_server: String,
    #[arg(long)]
    pub topic: String,
    #[arg(long = "num-records")]
    pub num_records: u64,
    /// Value size in bytes (at least 16: the send time and sequence are embedded).
    #[arg(long = "record-size")]
    pub record_size: usize,
    /// Records/sec (-1: as fast as the producer goes).
    #[arg(long, allow_negative_numbers = true)]
    pub throughput: f64,
    /// Producer properties (Kafka names), e.g. acks=all linger.ms=0.
    #[arg(long = "producer-props", num_args = 1.., value_name = "PROP-NAME=PROP-VALUE")]
    pub producer_props: Vec<String>,
    /// Consumer config properties file.
    #[arg(long = "consumer.config", value_name = "CONFIG-FILE")]
    pub consumer_config: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = ClientKind::Librdkafka)]
    pub client: ClientKind,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Partitions of the topic if it has to be created (an existing topic is kept).
    #[arg(long = "create-topic-partitions", default_value_t = 1)]
    pub create_topic_partitions: i32,
    /// Give up when the consumer received nothing for this long after the producer finished.
    #[arg(long, default_value_t = 30_000)]
    pub timeout: u64,
}

impl E2eArgs {
    pub fn to_opts(&self) -> anyhow::Result<E2eOpts> {
        let consumer_props = match &self.consumer_config {
            Some(path) => engine::read_props_file(path)?,
            None => Props::new(),
        };
        Ok(E2eOpts {
            bootstrap: self.bootstrap_server.clone(),
            topic: self.topic.clone(),
            num_records: self.num_records,
            record_size: self.record_size,
            throughput: self.throughput,
            producer_props: engine::parse_kv_props(&self.producer_props)?,
            consumer_props,
            client: self.client,
            create_topic_partitions: self.create_topic_partitions,
            timeout_ms: self.timeout,
            quiet: false,
            max_duration: None,
        })
    }

    pub fn run(&self) -> anyhow::Result<()> {
        let report = run_e2e(&self.to_opts()?)?;
        if let Some(path) = &self.json {
            write_json(path, &report)?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct E2eOpts {
    pub bootstrap: String,
    pub topic: String,
    pub num_records: u64,
    pub record_size: usize,
    pub throughput: f64,
    pub producer_props: Props,
    pub consumer_props: Props,
    pub client: ClientKind,
    /// Partitions if the topic is created (an existing one is kept).
    pub create_topic_partitions: i32,
    pub timeout_ms: u64,
    pub quiet: bool,
    /// Stop sending after this long (see `ProducerOpts::max_duration`); the consumer then
    /// waits `timeout_ms` for what was sent and reports a time-out.
    pub max_duration: Option<Duration>,
}

impl E2eOpts {
    pub fn new(
        bootstrap: &str,
        topic: &str,
        num_records: u64,
        record_size: usize,
        throughput: f64,
    ) -> Self {
        E2eOpts {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            num_records,
            record_size,
            throughput,
            producer_props: Props::new(),
            consumer_props: Props::new(),
            client: ClientKind::Librdkafka,
            create_topic_partitions: 1,
            timeout_ms: 30_000,
            quiet: false,
            max_duration: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct E2eReport {
    pub tool: String,
    pub client: ClientKind,
    pub bootstrap: String,
    pub topic: String,
    pub producer_props: std::collections::BTreeMap<String, String>,
    pub consumer_props: std::collections::BTreeMap<String, String>,
    pub num_records: u64,
    pub record_size: usize,
    pub throughput_target: f64,
    /// Records acknowledged to the producer.
    pub records_sent: u64,
    pub send_errors: u64,
    /// Distinct records of this run the consumer received.
    pub records_received: u64,
    pub duplicates: u64,
    /// Records of other runs (or not ours) skipped by the consumer.
    pub foreign_records: u64,
    pub timed_out: bool,
    pub start_time: Timestamp,
    pub end_time: Timestamp,
    pub elapsed_s: f64,
    /// Received records/sec and MiB/sec over the run.
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    /// Intended send time to consumption, in ms (microsecond precision).
    pub latency_ms: LatencySummary,
    /// Intended send time to the producer's delivery callback, in ms.
    pub produce_latency_ms: LatencySummary,
    /// Records received in each second of the run.
    pub series: Vec<SeriesPoint>,
}

/// Kafka's two result lines.
pub fn kafka_lines(latency: &LatencySummary) -> [String; 2] {
    [
        format!("Avg latency: {} ms", java_fixed(latency.avg, 4)),
        format!(
            "Percentiles: 50th = {}, 99th = {}, 99.9th = {}",
            latency.p50.floor() as u64,
            latency.p99.floor() as u64,
            latency.p99_9.floor() as u64
        ),
    ]
}

/// Our line after Kafka's, at microsecond precision.
pub fn extra_line(s: &LatencySummary) -> String {
    format!(
        "Percentiles (ms): 50th = {:.3}, 95th = {:.3}, 99th = {:.3}, 99.9th = {:.3}, 99.99th = {:.3}, max = {:.3}",
        s.p50, s.p95, s.p99, s.p99_9, s.p99_99, s.max
    )
}

/// Writes the e2e header into `value[..16]`.
pub fn encode_header(value: &mut [u8], intended_ns: u64, run_id: u32, seq: u32) {
    value[0..8].copy_from_slice(&intended_ns.to_le_bytes());
    value[8..12].copy_from_slice(&run_id.to_le_bytes());
    value[12..16].copy_from_slice(&seq.to_le_bytes());
}

/// Reads (intended ns, run id, seq) back from a value prefix.
pub fn decode_header(prefix: &[u8; 16]) -> (u64, u32, u32) {
    let ns = u64::from_le_bytes(
        prefix[0..8]
            .try_into()
            .expect("a slice of the array's length"),
    );
    let run = u32::from_le_bytes(
        prefix[8..12]
            .try_into()
            .expect("a slice of the array's length"),
    );
    let seq = u32::from_le_bytes(
        prefix[12..16]
            .try_into()
            .expect("a slice of the array's length"),
    );
    (ns, run, seq)
}

struct ConsumerSide {
    hist: LatencyHistogram,
    received: u64,
    duplicates: u64,
    foreign: u64,
    timed_out: bool,
    bytes: u64,
    series: ThroughputSeries,
}

#[allow(clippy::too_many_arguments)]
fn consume(
    opts: &E2eOpts,
    props: &Props,
    epoch: Instant,
    run_id: u32,
    ready: mpsc::Sender<Result<(), String>>,
    producer_done: &AtomicBool,
    abort: &AtomicBool,
) -> ConsumerSide {
    let mut side = ConsumerSide {
        hist: LatencyHistogram::new(),
        received: 0,
        duplicates: 0,
        foreign: 0,
        timed_out: false,
        bytes: 0,
        series: ThroughputSeries::new(epoch),
    };
    let setup = (|| -> Result<Box<dyn engine::Consumer>, String> {
        let mut consumer =
            engine::consumer(opts.client, &opts.bootstrap, props).map_err(|e| format!("{e:#}"))?;
        consumer.assign_all(&opts.topic)?;
        // One poll so the fetch position is established before the producer starts.
        let mut warm = Vec::new();
        consumer.poll_into(&mut warm, Duration::from_millis(100))?;
        Ok(consumer)
    })();
    let mut consumer = match setup {
        Ok(c) => {
            let _ = ready.send(Ok(()));
            c
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return side;
        }
    };
    let n = opts.num_records;
    let mut seen = vec![false; n as usize];
    let mut batch: Vec<ConsumedRecord> = Vec::with_capacity(4096);
    let timeout = Duration::from_millis(opts.timeout_ms);
    let mut last_progress = Instant::now();
    let mut done_at: Option<Instant> = None;
    let mut errors = 0u32;
    while side.received < n && !abort.load(Ordering::Relaxed) {
        batch.clear();
        if let Err(e) = consumer.poll_into(&mut batch, Duration::from_millis(10)) {
            errors += 1;
            if !opts.quiet && errors <= 10 {
                eprintln!("poll error: {e}");
            }
        }
        let now = Instant::now();
        let now_ns = now.saturating_duration_since(epoch).as_nanos() as u64;
        for r in &batch {
            let (intended_ns, run, seq) = decode_header(&r.value_prefix);
            if run != run_id || r.value_len < HEADER_LEN || seq as u64 >= n {
                side.foreign += 1;
                continue;
            }
            if std::mem::replace(&mut seen[seq as usize], true) {
                side.duplicates += 1;
                continue;
            }
            let latency_ns = now_ns.saturating_sub(intended_ns);
            side.hist.record_us(latency_ns / 1000);
            side.received += 1;
            let bytes = (r.key_len + r.value_len) as u64;
            side.bytes += bytes;
            side.series.record(now, 1, bytes);
            last_progress = now;
            if !opts.quiet && seq % 1000 == 0 {
                println!("{}\t{}", seq, latency_ns as f64 / 1000.0 / 1000.0);
            }
        }
        if producer_done.load(Ordering::Acquire) {
            // The timeout runs from the later of the producer's end and the last new record.
            let since = *done_at.get_or_insert(now);
            if now.saturating_duration_since(last_progress.max(since)) > timeout {
                side.timed_out = true;
                break;
            }
        }
    }
    side
}

/// Runs e2e-latency: prints Kafka's lines (unless `quiet`) and returns every figure.
pub fn run_e2e(opts: &E2eOpts) -> anyhow::Result<E2eReport> {
    if opts.record_size < HEADER_LEN {
        bail!(
            "--record-size must be at least {HEADER_LEN} (the send time and sequence are embedded)"
        );
    }
    if opts.num_records == 0 || opts.num_records > u32::MAX as u64 {
        bail!("--num-records must be between 1 and {}", u32::MAX);
    }
    engine::create_topic(&opts.bootstrap, &opts.topic, opts.create_topic_partitions)?;

    let mut producer_props = opts.producer_props.clone();
    if engine::get_prop(&producer_props, "client.id").is_none() {
        engine::set_prop(&mut producer_props, "client.id", "e2e-latency-producer");
    }
    let mut consumer_props = opts.consumer_props.clone();
    if engine::get_prop(&consumer_props, "client.id").is_none() {
        engine::set_prop(&mut consumer_props, "client.id", "e2e-latency-consumer");
    }

    let epoch = Instant::now();
    let run_id: u32 = rand::random::<u32>() | 1;
    let producer_done = Arc::new(AtomicBool::new(false));
    let abort = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let consumer_thread = {
        let opts = opts.clone();
        let props = consumer_props.clone();
        let producer_done = Arc::clone(&producer_done);
        let abort = Arc::clone(&abort);
        std::thread::Builder::new()
            .name("e2e-consumer".into())
            .spawn(move || {
                consume(
                    &opts,
                    &props,
                    epoch,
                    run_id,
                    ready_tx,
                    &producer_done,
                    &abort,
                )
            })?
    };
    let ready = ready_rx
        .recv()
        .unwrap_or_else(|_| Err("consumer thread exited".into()));
    if let Err(e) = ready {
        let _ = consumer_thread.join();
        bail!("consumer: {e}");
    }

    let produced = (|| -> anyhow::Result<(LatencyHistogram, u64, SystemTime, Instant)> {
        let mut producer = engine::producer(opts.client, &opts.bootstrap, &producer_props)?;
        let acks = Arc::new(Mutex::new((LatencyHistogram::new(), 0u64)));
        let start_wall = SystemTime::now();
        let start = Instant::now();
        let pacer = Pacer::new(start, opts.throughput);
        let mut value = vec![b'A'; opts.record_size];
        for i in 0..opts.num_records {
            if opts.max_duration.is_some_and(|max| start.elapsed() > max) {
                break;
            }
            let intended = pacer.intended(i);
            if pacer.throttled() {
                pacer.wait_until(intended, producer.as_mut());
            }
            let intended_ns = intended.saturating_duration_since(epoch).as_nanos() as u64;
            encode_header(&mut value, intended_ns, run_id, i as u32);
            let timestamp_ms = unix_ms(SystemTime::now());
            loop {
                let acks = Arc::clone(&acks);
                let callback: engine::DeliveryCallback = Box::new(move |result| {
                    let now = Instant::now();
                    let mut a = acks.lock().unwrap_or_else(|e| e.into_inner());
                    match result {
                        Ok(_) => a.0.record(now.saturating_duration_since(intended)),
                        Err(e) => {
                            if a.1 == 0 {
                                eprintln!("delivery failed: {e}");
                            }
                            a.1 += 1;
                        }
                    }
                });
                match producer.send(&opts.topic, None, None, &value, timestamp_ms, callback) {
                    Ok(()) => break,
                    Err(SendError::QueueFull) => producer.poll(Duration::from_millis(1)),
                    Err(SendError::Other(e)) => bail!("send failed: {e}"),
                }
            }
            producer.poll(Duration::ZERO);
        }
        if let Err(e) = producer.flush(super::producer::flush_timeout(opts.max_duration)) {
            eprintln!("flush failed: {e}");
        }
        drop(producer);
        let a = acks.lock().unwrap_or_else(|e| e.into_inner());
        Ok((a.0.clone(), a.1, start_wall, start))
    })();
    producer_done.store(true, Ordering::Release);
    if produced.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    let side = consumer_thread
        .join()
        .map_err(|_| anyhow!("consumer thread panicked"))?;
    let (produce_hist, send_errors, start_wall, start) = produced?;
    let end = Instant::now();
    let end_wall = SystemTime::now();
    let elapsed = end.saturating_duration_since(start).as_secs_f64();

    let report = E2eReport {
        tool: "e2e-latency".into(),
        client: opts.client,
        bootstrap: opts.bootstrap.clone(),
        topic: opts.topic.clone(),
        producer_props: producer_props.iter().cloned().collect(),
        consumer_props: consumer_props.iter().cloned().collect(),
        num_records: opts.num_records,
        record_size: opts.record_size,
        throughput_target: opts.throughput,
        records_sent: produce_hist.count(),
        send_errors,
        records_received: side.received,
        duplicates: side.duplicates,
        foreign_records: side.foreign,
        timed_out: side.timed_out,
        start_time: Timestamp::of(start_wall),
        end_time: Timestamp::of(end_wall),
        elapsed_s: elapsed,
        records_per_sec: side.received as f64 / elapsed,
        mb_per_sec: mb(side.bytes) / elapsed,
        latency_ms: side.hist.summary(),
        produce_latency_ms: produce_hist.summary(),
        series: side.series.points(end),
    };
    if !opts.quiet {
        if side.timed_out {
            println!(
                "WARNING: received {} of {} records before the timeout ({} ms).",
                side.received, opts.num_records, opts.timeout_ms
            );
        }
        for line in kafka_lines(&report.latency_ms) {
            println!("{line}");
        }
        println!("{}", extra_line(&report.latency_ms));
    }
    Ok(report)
}
