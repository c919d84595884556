//! The client's and protocol's ceilings: producing to and consuming from an in-process null
//! broker that stores nothing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;

use super::NullFigures;
use crate::cpu::{self, CpuSampler};
use crate::engine::ClientKind;
use crate::null_broker::{NullBroker, NullBrokerArgs};
use crate::perf;

/// Runs `f` on its own thread and waits at most `deadline` for it. A run that does not
/// finish is left behind (it cannot be cancelled) and None is returned, so that one stuck
/// client does not hang the whole measurement.
pub(super) fn with_deadline<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline).ok()
}

/// A produce run against the null broker: the report, the CPU used and the Produce
/// requests the null broker received; None when it did not finish within `deadline`.
pub(super) fn null_producer(
    broker: &NullBroker,
    client: ClientKind,
    topic: &str,
    records: u64,
    size: usize,
    rate: f64,
    deadline: Duration,
) -> Result<Option<(perf::ProducerReport, cpu::CpuUsage, u64)>> {
    let bootstrap = broker.addr().to_string();
    let mut opts = perf::ProducerOpts::new(&bootstrap, topic, records, size);
    opts.client = client;
    opts.throughput = if rate > 0.0 { rate } else { -1.0 };
    opts.props = vec![
        ("acks".into(), "1".into()),
        (
            "linger.ms".into(),
            if rate > 0.0 { "0" } else { "1" }.into(),
        ),
    ];
    if rate <= 0.0 {
        opts.props.push(("batch.size".into(), "131072".into()));
    }
    opts.create_topic_partitions = Some(1);
    opts.quiet = true;
    let requests0 = broker.counters().produce_requests.load(Ordering::Relaxed);
    let sampler = CpuSampler::start(broker.cpu_source());
    let Some(report) = with_deadline(deadline, move || perf::run_producer(&opts)) else {
        eprintln!("limits: the {client} producer ({topic}) did not finish within {deadline:?}; its figures are n/a");
        return Ok(None);
    };
    let report = report?;
    let usage = sampler.stop();
    let requests = broker.counters().produce_requests.load(Ordering::Relaxed) - requests0;
    Ok(Some((report, usage, requests)))
}

/// The null-broker runs: max rate and consume with `client`, fixed rate with
/// `latency_client`.
pub fn null_figures(
    client: ClientKind,
    latency_client: ClientKind,
    quick: bool,
    fixed_rate: f64,
) -> Result<NullFigures> {
    let mut broker = NullBroker::start(&NullBrokerArgs {
        record_size: 1024,
        ..Default::default()
    })?;
    let nan = f64::NAN;
    let mut f = NullFigures {
        client,
        latency_client,
        fixed_rate,
        ..Default::default()
    };
    let max_records = if quick { 20_000 } else { 1_000_000 };
    let deadline = Duration::from_secs(if quick { 30 } else { 120 });
    match null_producer(
        &broker,
        client,
        "limits-max",
        max_records,
        100,
        0.0,
        deadline,
    )? {
        Some((report, usage, requests)) => {
            f.produce_100b_records_s = report.records_per_sec;
            f.produce_100b_mib_s = report.mb_per_sec;
            f.produce_100b_p50_ms = report.latency_ms.p50;
            f.produce_100b_p99_ms = report.latency_ms.p99;
            f.produce_100b_broker_cpu_us_per_record = usage
                .broker_cpu_us_per_request(report.records_sent)
                .unwrap_or(nan);
            f.produce_100b_client_cpu_s_per_gib =
                usage.client_cpu_s_per_gib(report.bytes).unwrap_or(nan);
            f.produce_100b_records_per_request =
                report.records_sent as f64 / requests.max(1) as f64;
        }
        None => {
            f.produce_100b_records_s = nan;
            f.produce_100b_mib_s = nan;
            f.produce_100b_p50_ms = nan;
            f.produce_100b_p99_ms = nan;
            f.produce_100b_broker_cpu_us_per_record = nan;
            f.produce_100b_client_cpu_s_per_gib = nan;
            f.produce_100b_records_per_request = nan;
        }
    }

    let fixed_s = if quick { 0.5 } else { 5.0 };
    let fixed_records = ((fixed_rate * fixed_s) as u64).max(100);
    let deadline = Duration::from_secs_f64(fixed_s * 3.0 + 20.0);
    match null_producer(
        &broker,
        latency_client,
        "limits-fixed",
        fixed_records,
        100,
        fixed_rate,
        deadline,
    )? {
        Some((report, usage, requests)) => {
            f.fixed_rate_p50_ms = report.latency_ms.p50;
            f.fixed_rate_p99_ms = report.latency_ms.p99;
            f.fixed_rate_p99_9_ms = report.latency_ms.p99_9;
            f.fixed_rate_broker_cpu_us_per_request = usage
                .broker_cpu_s
                .map_or(nan, |s| s * 1e6 / requests.max(1) as f64);
            f.fixed_rate_records_per_request = report.records_sent as f64 / requests.max(1) as f64;
        }
        None => {
            f.fixed_rate_p50_ms = nan;
            f.fixed_rate_p99_ms = nan;
            f.fixed_rate_p99_9_ms = nan;
            f.fixed_rate_broker_cpu_us_per_request = nan;
            f.fixed_rate_records_per_request = nan;
        }
    }

    let consume_records = if quick { 20_000 } else { 500_000 };
    let mut opts = perf::ConsumerOpts::new(
        &broker.addr().to_string(),
        "limits-consume",
        consume_records,
    );
    opts.client = client;
    opts.quiet = true;
    opts.hide_header = true;
    let sampler = CpuSampler::start(broker.cpu_source());
    // The null broker's partitions never end, so a consumer that drains whatever has
    // arrived before returning could loop for ever: the deadline keeps that from hanging
    // the whole run.
    let deadline = Duration::from_secs(if quick { 20 } else { 60 });
    match with_deadline(deadline, move || perf::run_consumer(&opts)) {
        Some(report) => {
            let report = report?;
            let usage = sampler.stop();
            f.consume_1kb_mib_s = report.mb_per_sec;
            f.consume_1kb_client_cpu_s_per_gib =
                usage.client_cpu_s_per_gib(report.bytes).unwrap_or(nan);
        }
        None => {
            eprintln!("limits: the {client} consumer did not finish within {deadline:?}; consume figures n/a");
            f.consume_1kb_mib_s = nan;
            f.consume_1kb_client_cpu_s_per_gib = nan;
        }
    }
    broker.stop();
    Ok(f)
}
