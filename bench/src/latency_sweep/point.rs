//! One point of the sweep: a fixed-rate produce or e2e run against one target, with the
//! broker's CPU over it; and a target's idle CPU.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};

use super::targets::Target;
use super::{producer_props, LatencySweepArgs, Point, SweepMode, TargetKind};
use crate::broker_process::settle;
use crate::cpu::{self, CpuSampler};
use crate::engine::{self, ClientKind};
use crate::native::producer::PRODUCE_REQUESTS_SENT;
use crate::perf;

/// How long an e2e point's consumer waits for records after the producer ends.
const E2E_CONSUMER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a target may take to acknowledge the topic's creation before the point is run.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn unique_topic(target: &str, mode: SweepMode, rate: f64) -> String {
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
pub(super) fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    let deadline = Instant::now() + TOPIC_TIMEOUT;
    loop {
        match engine::create_topic(bootstrap, topic, partitions) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

pub(super) fn opt_pos(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// One produce or e2e point against one target.
pub(super) fn run_point(
    args: &LatencySweepArgs,
    target: &Target,
    mode: SweepMode,
    rate: f64,
) -> Point {
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

pub(super) fn measure_point(
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
pub(super) fn idle_percent(pid: u32, seconds: f64) -> Result<f64> {
    let c0 = cpu::process_cpu_seconds(pid)?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let c1 = cpu::process_cpu_seconds(pid)?;
    Ok((c1 - c0) / t0.elapsed().as_secs_f64() * 100.0)
}
