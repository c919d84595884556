//! The measurement plan of `bench fetch-cost`: data first, then the limits, then each path in
//! turn against the started or the given broker, and the ratios to plaintext zero-copy.

use std::path::Path;

use anyhow::Result;

use super::broker::{fetch_path_counters, Launcher, Source};
use super::report::{measured, skipped};
use super::tls::{ktls_tx_sockets, ktls_unavailable, make_certs, probe_tls};
use super::workload::{consume_rounds, consumer_props, measure_limits, produce, warm};
use super::{targets, FetchCostArgs, FetchCostReport, PathKind, PathResult, MIB};
use crate::broker_process::{default_broker_bin, free_ports};
use crate::compare::fmt_num;
use crate::cpu;
use crate::perf;

pub(super) fn run_in(
    args: &FetchCostArgs,
    work: &Path,
    records: u64,
    paths: &[PathKind],
) -> Result<FetchCostReport> {
    let ktls_reason = ktls_unavailable();
    let ktls = ktls_reason
        .clone()
        .unwrap_or_else(|| "the kernel accepts the TLS ULP".into());
    let mut source = match &args.bootstrap {
        Some(b) => Source::Given {
            bootstrap: b.clone(),
            ssl_bootstrap: args.ssl_bootstrap.clone(),
            ssl_ca: args.ssl_ca.clone(),
            pid: cpu::resolve_broker_pid(args.broker_pid, b),
        },
        None => {
            let ports = free_ports()?;
            let certs_dir = work.join("certs");
            std::fs::create_dir_all(&certs_dir)?;
            Source::Started(Launcher {
                bin: args.broker_bin.clone().unwrap_or_else(default_broker_bin),
                dir: work.to_path_buf(),
                plain_port: ports.0,
                ssl_port: ports.1,
                overrides: args.broker_overrides.clone(),
                certs: if paths.iter().any(|p| p.is_tls()) {
                    make_certs(&certs_dir)
                } else {
                    Err("no TLS path asked for".into())
                },
                verbose: args.verbose,
                starts: 0,
            })
        }
    };
    let broker = match &source {
        Source::Started(l) => format!("started: {}", l.bin.display()),
        Source::Given { bootstrap, .. } => format!("given: {bootstrap}"),
    };

    // Data first, with the broker's defaults (a path's keys must not keep the data out).
    match &mut source {
        Source::Started(launcher) => {
            let keys = launcher.keys(None, false).map_err(anyhow::Error::msg)?;
            let running = launcher
                .start(&keys, false)
                .map_err(|e| anyhow::anyhow!("the broker did not start with its defaults: {e}"))?;
            let addr = launcher.plain_addr();
            let produced = produce(args, &addr, records);
            let _ = running.stop();
            produced?;
        }
        Source::Given { bootstrap, .. } => produce(args, bootstrap, records)?,
    }

    let limits = measure_limits(work, args.bytes)?;

    let mut results = Vec::new();
    for &path in paths {
        eprintln!("fetch-cost: {} ...", path.label());
        let result = match &mut source {
            Source::Started(launcher) => {
                if path == PathKind::Ktls {
                    if let Some(why) = &ktls_reason {
                        results.push(skipped(path, format!("unavailable: {why}")));
                        continue;
                    }
                }
                measure_started(args, launcher, path, records)
            }
            Source::Given {
                bootstrap,
                ssl_bootstrap,
                ssl_ca,
                pid,
            } => match path {
                PathKind::Zerocopy => {
                    let props = consumer_props(args, None)?;
                    warm_up(args, bootstrap, *pid, &props, records)?;
                    consume_rounds(args, bootstrap, *pid, &props, records).map(|rounds| {
                        measured(
                            path,
                            "plaintext (the given broker's configured path)".into(),
                            rounds,
                            String::new(),
                        )
                    })
                }
                PathKind::Tls => match (ssl_bootstrap, ssl_ca) {
                    (Some(ssl), Some(ca)) => {
                        let props = consumer_props(args, Some(ca))?;
                        let tls = probe_tls(ssl, &props);
                        warm_up(args, ssl, *pid, &props, records)?;
                        consume_rounds(args, ssl, *pid, &props, records).map(|rounds| {
                            let mut r = measured(
                                path,
                                "TLS (the given broker's configured path)".into(),
                                rounds,
                                String::new(),
                            );
                            r.tls = tls.ok();
                            r
                        })
                    }
                    _ => Ok(skipped(path, "no --ssl-bootstrap/--ssl-ca given".into())),
                },
                _ => Ok(skipped(
                    path,
                    "needs a broker this command starts (--bootstrap was given)".into(),
                )),
            },
        };
        results.push(result.unwrap_or_else(|e| {
            let mut r = skipped(path, format!("failed: {e:#}"));
            r.note = format!("failed: {e:#}");
            r
        }));
    }
    if args.bootstrap.is_none() && !args.keep {
        let _ = std::fs::remove_dir_all(work.join("data"));
    }

    let base = results
        .iter()
        .find(|r| r.path == PathKind::Zerocopy && !r.skipped)
        .map(|r| (r.broker_cpu_s_per_gib, r.mib_per_sec));
    if let Some((cpu0, mib0)) = base {
        for r in &mut results {
            r.cpu_ratio = crate::compare::ratio(r.broker_cpu_s_per_gib, cpu0);
            r.throughput_ratio = crate::compare::ratio(r.mib_per_sec, mib0);
        }
    }
    let targets = targets(&results, &limits, ktls_reason.as_deref());
    Ok(FetchCostReport {
        bytes: records * args.record_size as u64,
        record_size: args.record_size,
        partitions: args.partitions,
        rounds: args.rounds.max(1),
        broker,
        paths: results,
        limits,
        targets,
        ktls,
        machine: crate::compare::machine_info(),
        date: perf::output::rfc3339(std::time::SystemTime::now()),
    })
}

/// `--warmup-rounds` unmeasured consumes of a given broker (a JVM's JIT).
fn warm_up(
    args: &FetchCostArgs,
    bootstrap: &str,
    pid: Option<u32>,
    props: &[(String, String)],
    records: u64,
) -> Result<()> {
    match args.warmup_rounds {
        Some(n) if n > 0 => {
            eprintln!("fetch-cost: {n} warm-up consume(s), not measured");
            let mut warm = args.clone();
            warm.rounds = n;
            consume_rounds(&warm, bootstrap, pid, props, records).map(drop)
        }
        _ => Ok(()),
    }
}

/// One path against a broker this command starts.
pub(super) fn measure_started(
    args: &FetchCostArgs,
    launcher: &mut Launcher,
    path: PathKind,
    records: u64,
) -> Result<PathResult> {
    let keys = match launcher.keys(Some(path), true) {
        Ok(k) => k,
        Err(why) => return Ok(skipped(path, why)),
    };
    let (mut running, label, note) = match launcher.start(&keys, path.is_tls()) {
        Ok(r) => (r, path.label().to_string(), String::new()),
        // A broker from before fetch.path: measure its default (only) path as the
        // baseline, saying so, rather than nothing.
        Err(why) if path == PathKind::Zerocopy => {
            let keys = launcher
                .keys(Some(path), false)
                .map_err(anyhow::Error::msg)?;
            let running = launcher.start(&keys, false).map_err(anyhow::Error::msg)?;
            (
                running,
                "plaintext, the broker's default path".to_string(),
                format!("fetch.path=zerocopy not taken: {why}; measured the default path instead"),
            )
        }
        Err(why) => return Ok(skipped(path, why)),
    };
    let pid = running.pid();
    warm(&launcher.dir.join("data"));
    if let Some(why) = running.exited() {
        return Ok(skipped(path, why));
    }
    let ca = if path.is_tls() {
        Some(
            launcher
                .certs
                .as_ref()
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .ca
                .clone(),
        )
    } else {
        None
    };
    let props = consumer_props(args, ca.as_deref())?;
    let bootstrap = if path.is_tls() {
        launcher.ssl_addr()
    } else {
        launcher.plain_addr()
    };
    let tls = if path.is_tls() {
        Some(probe_tls(&bootstrap, &props)?)
    } else {
        None
    };
    let ktls_before = ktls_tx_sockets();
    let rounds = consume_rounds(args, &bootstrap, Some(pid), &props, records);
    let ktls_after = ktls_tx_sockets();
    let log = running.stop();
    let mut result = measured(path, label, rounds?, note);
    result.tls = tls;
    result.broker_fetch_path = fetch_path_counters(&log).map(|sums| {
        let parts: Vec<String> = sums
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k} {} MiB", fmt_num(Some(*v as f64 / MIB))))
            .collect();
        if parts.is_empty() {
            "broker fetch-path counters all 0".to_string()
        } else {
            format!("broker: {}", parts.join(", "))
        }
    });
    if path == PathKind::Ktls {
        match (ktls_before, ktls_after) {
            (Some(a), Some(b)) if b > a => {}
            (Some(_), Some(_)) => {
                result.note = "the kernel's TLS counters did not move (TlsTxSw/TlsTxDevice of /proc/net/tls_stat): the broker fell back to user-space TLS".into()
            }
            _ => result.note = "no /proc/net/tls_stat: kTLS use not confirmed".into(),
        }
    }
    Ok(result)
}
