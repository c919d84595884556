//! `bench fetch-cost`: what a GiB of fetched data costs the broker on each fetch path.
//!
//! The command starts our broker (or takes one by address, or starts Apache Kafka with
//! `--peer kafka`: see [`crate::peer`]), produces `--bytes` of records
//! (2 GiB by default) into one topic, makes the segment files hot (read once through the
//! page cache), then has the native consumer read all of it over each path in turn, the
//! broker restarted on the same data directory with that path's keys:
//!
//! | path | broker keys |
//! |---|---|
//! | plaintext zero-copy | `fetch.path=zerocopy` |
//! | plaintext copy | `fetch.path=copy` (reads into a buffer and writes, as Kafka does) |
//! | TLS, user space | an `SSL://` listener (`ssl.keystore.type=PEM`...), `ssl.ktls.enable=false` |
//! | kTLS | the same listener with `ssl.ktls.enable=true`, where the kernel has TLS |
//!
//! A path the broker refuses (an unknown key, an `SSL://` listener it does not support:
//! the broker exits at start-up) is skipped with the broker's own words; when even
//! `fetch.path=zerocopy` is refused, the first row measures the broker's default path
//! instead (a broker from before zero-copy: its only path, which copies). kTLS is skipped
//! where the kernel has no TLS upper-layer protocol (`setsockopt(TCP_ULP, "tls")` fails).
//!
//! Per path: the broker's CPU seconds (utime + stime of `/proc/<pid>/stat`, all threads)
//! over the consume window only, per GiB of record payload; payload MiB/s; both as ratios to
//! plaintext zero-copy. The consumer is the crate's native client, over TLS with rustls and
//! the ring provider (the broker's crypto), offering only AES-128-GCM suites so that the
//! cipher is the one `bench limits` measures; its own CPU is reported but is not the figure.
//!
//! The same run measures the limits the targets are stated against (see
//! [`crate::limits`]): a bare sendfile loop (page cache -> loopback socket, sender CPU),
//! loopback TCP throughput, and AES-128-GCM (ring, 16 KiB records, in place; `openssl speed`
//! beside it). Targets (issue 9): zero-copy CPU/GiB <= 1.15x the sendfile loop's; user-space
//! TLS <= plaintext zero-copy + 1.25x the cipher's CPU/GiB; kTLS <= 0.85x user-space TLS;
//! plaintext zero-copy throughput >= 60 % of loopback TCP.

mod args;
mod broker;
mod measure;
mod render;
mod report;
mod targets;
#[cfg(test)]
mod tests;
mod tls;
mod workload;

use anyhow::{Context, Result};

pub use self::args::{FetchCostArgs, PathKind};
pub use self::broker::fetch_path_counters;
use self::measure::run_in;
use self::render::draw;
pub use self::render::markdown;
pub use self::report::{FetchCostReport, PathResult, Round, RunLimits, Target};
pub use self::targets::targets;
pub use self::tls::{ktls_unavailable, make_certs, Certs};
use crate::perf;

const MIB: f64 = 1024.0 * 1024.0;
const TOPIC: &str = "bench-fetch-cost";

/// `bench fetch-cost`.
pub fn run(args: &FetchCostArgs) -> Result<FetchCostReport> {
    let report = match args.peer {
        None => measure_report(args)?,
        Some(kind) => {
            let peer = crate::peer::Peer::start(kind, None)?;
            eprintln!("fetch-cost: {}", peer.describe());
            let mut given = args.clone();
            given.peer = None;
            given.bootstrap = Some(peer.bootstrap.clone());
            given.broker_pid = Some(peer.pid);
            given.warmup_rounds = Some(args.warmup_rounds.unwrap_or(2));
            let mut report = measure_report(&given);
            if let Ok(report) = &mut report {
                report.broker = peer.describe();
            }
            drop(peer);
            report?
        }
    };
    let md = markdown(&report);
    println!("{md}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.json {
        perf::output::write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        draw(path, &report)?;
        eprintln!("fetch-cost: figure in {}", path.display());
    }
    Ok(report)
}

/// Produces, measures the limits and every path; the report.
fn measure_report(args: &FetchCostArgs) -> Result<FetchCostReport> {
    anyhow::ensure!(args.record_size > 0, "--record-size must be positive");
    let records = (args.bytes / args.record_size as u64).max(1);
    let paths = if args.paths.is_empty() {
        PathKind::ALL.to_vec()
    } else {
        args.paths.clone()
    };
    let (work, remove_work) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("bench-fetch-cost-{}", std::process::id())),
            !args.keep,
        ),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let result = run_in(args, &work, records, &paths);
    if remove_work {
        let _ = std::fs::remove_dir_all(&work);
    }
    result
}
