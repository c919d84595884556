//! The load of `bench fetch-cost`: the produce that fills the topic, the page-cache warm-up,
//! the consume rounds with the broker's CPU over each, and the limits of the same run.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{FetchCostArgs, Round, RunLimits, MIB, TOPIC};
use crate::broker_process::settle;
use crate::compare::fmt_num;
use crate::cpu::CpuSampler;
use crate::engine::ClientKind;
use crate::limits;
use crate::native::MetaClient;
use crate::perf;

/// Only AES-128-GCM is offered over TLS: the cipher `bench limits` measures.
const AES128_SUITES: &str = "TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,\
                             TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256";

/// Reads every file under `dir` once, so that the segments are in the page cache.
pub(super) fn warm(dir: &Path) -> u64 {
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 20];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(mut f) = File::open(&p) {
                while let Ok(n) = f.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
            }
        }
    }
    total
}

pub(super) fn consumer_props(
    args: &FetchCostArgs,
    tls_ca: Option<&Path>,
) -> Result<Vec<(String, String)>> {
    let mut props = vec![("client.id".to_string(), "bench-fetch-cost".to_string())];
    if let Some(ca) = tls_ca {
        props.push(("security.protocol".into(), "SSL".into()));
        props.push(("ssl.truststore.location".into(), ca.display().to_string()));
        props.push(("ssl.cipher.suites".into(), AES128_SUITES.into()));
    }
    for item in &args.consumer_props {
        let (k, v) = item
            .split_once('=')
            .with_context(|| format!("--consumer-prop {item}: expected key=value"))?;
        props.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(props)
}

/// Consumes the whole topic `rounds` times; the broker's CPU over each consume.
pub(super) fn consume_rounds(
    args: &FetchCostArgs,
    bootstrap: &str,
    pid: Option<u32>,
    props: &[(String, String)],
    records: u64,
) -> Result<Vec<Round>> {
    let mut rounds = Vec::new();
    for r in 0..args.rounds.max(1) {
        let mut opts = perf::ConsumerOpts::new(bootstrap, TOPIC, records);
        opts.client = ClientKind::Native;
        opts.props = props.to_vec();
        opts.quiet = true;
        opts.hide_header = true;
        opts.timeout_ms = 30_000;
        if let Some(pid) = pid {
            settle(pid);
        }
        let sampler = CpuSampler::start(pid);
        let report = perf::run_consumer(&opts)?;
        let usage = sampler.stop();
        if report.messages < records {
            bail!(
                "round {}: {} of {records} records consumed (timed out: {})",
                r + 1,
                report.messages,
                report.timed_out
            );
        }
        let bytes = report.messages * args.record_size as u64;
        let round = Round {
            bytes,
            records: report.messages,
            elapsed_s: report.elapsed_s,
            mib_per_sec: bytes as f64 / MIB / report.elapsed_s.max(1e-9),
            broker_cpu_s: usage.broker_cpu_s,
            broker_cpu_s_per_gib: usage.broker_cpu_s_per_gib(bytes),
            client_cpu_s_per_gib: usage.client_cpu_s_per_gib(bytes),
        };
        eprintln!(
            "fetch-cost:   round {}: {} MiB/s, broker CPU {} s/GiB, client CPU {} s/GiB",
            r + 1,
            fmt_num(Some(round.mib_per_sec)),
            fmt_num(round.broker_cpu_s_per_gib),
            fmt_num(round.client_cpu_s_per_gib)
        );
        rounds.push(round);
    }
    Ok(rounds)
}

/// Produces `records` records of `record_size` bytes into [`TOPIC`] at `bootstrap`.
pub(super) fn produce(args: &FetchCostArgs, bootstrap: &str, records: u64) -> Result<()> {
    MetaClient::new(bootstrap, "bench-fetch-cost", Duration::from_secs(30))
        .create_topic(TOPIC, args.partitions, 1, &[])
        .with_context(|| format!("creating {TOPIC}"))?;
    let mut opts = perf::ProducerOpts::new(bootstrap, TOPIC, records, args.record_size);
    opts.client = ClientKind::Native;
    opts.quiet = true;
    opts.props = vec![
        ("acks".into(), "1".into()),
        ("linger.ms".into(), "5".into()),
        ("batch.size".into(), "262144".into()),
    ];
    let report = perf::run_producer(&opts)?;
    eprintln!(
        "fetch-cost: produced {} records ({} MiB) at {} MiB/s",
        report.records_sent,
        fmt_num(Some(report.bytes as f64 / MIB)),
        fmt_num(Some(report.mb_per_sec))
    );
    anyhow::ensure!(
        report.records_sent >= records,
        "produced {} of {records} records",
        report.records_sent
    );
    Ok(())
}

/// Measures the limits the targets refer to.
pub(super) fn measure_limits(dir: &Path, bytes: u64) -> Result<RunLimits> {
    let budget = bytes.clamp(64 << 20, 1 << 30);
    let budget_s = 3.0;
    let mut l = RunLimits::default();
    eprintln!("fetch-cost: limits: bare sendfile loop ...");
    (l.sendfile_mib_s, l.sendfile_cpu_s_per_gib) = limits::sendfile_cost(
        dir,
        (256u64 << 20).min(budget),
        budget.max(1 << 30),
        budget_s,
    )?;
    eprintln!("fetch-cost: limits: loopback TCP ...");
    (
        l.tcp_loopback_mib_s,
        l.tcp_send_cpu_s_per_gib,
        l.tcp_recv_cpu_s_per_gib,
    ) = limits::tcp_loopback(budget.max(1 << 30), budget_s)?;
    eprintln!("fetch-cost: limits: AES-128-GCM ...");
    (l.ring_aes128gcm_cpu_s_per_gib, l.ring_aes128gcm_mib_s) =
        limits::ring_aes_gcm_cost(budget, budget_s)?;
    l.openssl_aes128gcm_mib_s = limits::openssl_speed_aes128gcm(2);
    (
        l.rustcrypto_aes128gcm_cpu_s_per_gib,
        l.rustcrypto_aes128gcm_mib_s,
    ) = limits::aes_gcm_cost(budget.min(256 << 20), 1.0)?;
    Ok(l)
}
