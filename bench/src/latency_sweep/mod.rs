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
//!   ([`cpu::resolve_broker_pid`]);
//! - **peers**: `--peer kafka` (or `kafka3`), Apache Kafka started for the run by
//!   `scripts/kafka-peer.sh` ([`crate::peer`]), its JVM's pid from the script.
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

mod args;
mod point;
mod render;
mod report;
mod targets;
#[cfg(test)]
mod tests;

use anyhow::{bail, Context, Result};

pub use self::args::{parse_other, parse_variant, producer_props, LatencySweepArgs, SweepMode};
use self::point::{idle_percent, run_point};
pub use self::render::{cell, markdown, plot, HEADER};
pub use self::report::{Idle, Point, SweepReport, TargetInfo, TargetKind};
use self::targets::{Started, Target, TempDir};
use crate::broker_process::{default_broker_bin, settle};
use crate::cpu;
use crate::engine::ClientKind;
use crate::null_broker::{NullBroker, NullBrokerArgs};
use crate::perf;

/// Smallest record for which the native engine's smallest batch holds exactly one record.
pub const MIN_SINGLE_RECORD_SIZE: usize = 64;

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
    // Peers (Apache Kafka) started for this run; stopped when `peers` is dropped.
    let mut peers: Vec<crate::peer::Peer> = Vec::new();
    for &kind in &args.peers {
        let peer = crate::peer::Peer::start(kind, None)?;
        eprintln!("latency-sweep: {}", peer.describe());
        targets.push(Target {
            info: TargetInfo {
                name: kind.name().to_string(),
                kind: TargetKind::Other,
                bootstrap: peer.bootstrap.clone(),
                pid: Some(peer.pid),
                config: Vec::new(),
            },
            cpu: peer.pid.into(),
        });
        peers.push(peer);
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
    drop(peers);

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
