//! `bench groups commits`: OffsetCommit requests to one group, a few in flight on one
//! connection: commits/s and the latency of each.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use wire::generated::api::ApiKey;
use wire::generated::OffsetCommitResponse;

use super::protocol::{
    check_commit, commit_request, config_value, find_coordinator, first_bootstrap,
};
use super::{
    unique_name, CommitsArgs, CLIENT_ID, FLUSH_POLICY_KEY, IO_TIMEOUT, OFFSETS_TOPIC,
    RESOURCE_BROKER, RESOURCE_TOPIC, TOPIC_FLUSH_POLICY_KEY,
};
use crate::cpu::{resolve_broker_pid, CpuSampler};
use crate::native::MetaClient;
use crate::perf::LatencyHistogram;

#[derive(Debug, Clone, Serialize)]
pub struct CommitsReport {
    pub commits: u64,
    pub partitions_per_commit: i32,
    pub in_flight: usize,
    pub seconds: f64,
    pub commits_per_s: f64,
    pub offsets_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_p999_ms: f64,
    pub latency_max_ms: f64,
    /// Broker CPU per OffsetCommit request, when its pid is known.
    pub broker_cpu_us_per_commit: Option<f64>,
    /// The broker's log.flush.policy and __consumer_offsets' flush.policy (our broker's keys).
    pub log_flush_policy: Option<String>,
    pub offsets_topic_flush_policy: Option<String>,
    pub group: String,
}

impl CommitsReport {
    pub fn line(&self) -> String {
        let cpu = self
            .broker_cpu_us_per_commit
            .map_or(String::new(), |c| format!(", broker CPU {c:.1} us/commit"));
        let flush = match (&self.log_flush_policy, &self.offsets_topic_flush_policy) {
            (Some(b), Some(t)) => {
                format!(", log.flush.policy={b}, {OFFSETS_TOPIC} flush.policy={t}")
            }
            (Some(b), None) => format!(", log.flush.policy={b}"),
            _ => String::new(),
        };
        format!(
            "commits: {} OffsetCommit requests in {:.2} s, {:.1} commits/s ({:.0} offsets/s), latency p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms ({} partitions each, {} in flight{cpu}{flush})",
            self.commits,
            self.seconds,
            self.commits_per_s,
            self.offsets_per_s,
            self.latency_p50_ms,
            self.latency_p99_ms,
            self.latency_p999_ms,
            self.latency_max_ms,
            self.partitions_per_commit,
            self.in_flight,
        )
    }
}

pub fn run_commits(a: &CommitsArgs) -> Result<CommitsReport> {
    if a.partitions < 1 || a.in_flight == 0 || a.seconds <= 0.0 {
        bail!("--partitions, --in-flight and --seconds must be positive");
    }
    let group = a
        .common
        .group
        .clone()
        .unwrap_or_else(|| unique_name("bench-commits"));
    let mut meta = MetaClient::new(&a.common.bootstrap_server, CLIENT_ID, IO_TIMEOUT);
    meta.create_topic(&a.topic, a.partitions, 1, &[])
        .with_context(|| format!("creating topic {}", a.topic))?;
    let bootstrap = first_bootstrap(&a.common.bootstrap_server)?;
    let mut boot = crate::native::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT, None)?;
    let (node, coordinator) = find_coordinator(&mut boot, &group)?;
    let log_flush_policy = config_value(
        &mut boot,
        RESOURCE_BROKER,
        &node.to_string(),
        FLUSH_POLICY_KEY,
    );
    let offsets_topic_flush_policy = config_value(
        &mut boot,
        RESOURCE_TOPIC,
        OFFSETS_TOPIC,
        TOPIC_FLUSH_POLICY_KEY,
    );
    drop(boot);

    let mut conn = crate::native::connect(&coordinator, CLIENT_ID, IO_TIMEOUT, None)?;
    let version = conn.versions().pick(ApiKey::OffsetCommit, 2, 9)?;
    // One commit first: the group exists (Empty) before the clock starts.
    let warmup = commit_request(&group, -1, "", &a.topic, a.partitions, 0);
    check_commit(&conn.request(ApiKey::OffsetCommit, version, &warmup)?)?;

    let pid = resolve_broker_pid(a.pid, &coordinator);
    let mut hist = LatencyHistogram::new();
    let mut pending: VecDeque<(i32, Instant)> = VecDeque::with_capacity(a.in_flight);
    let mut offset = 0i64;
    let cpu = CpuSampler::start(pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.seconds);
    loop {
        let sending = Instant::now() < deadline;
        if sending && pending.len() < a.in_flight {
            offset += 1;
            let request = commit_request(&group, -1, "", &a.topic, a.partitions, offset);
            let corr = conn.send(ApiKey::OffsetCommit, version, &request)?;
            pending.push_back((corr, Instant::now()));
            continue;
        }
        let Some((corr, sent)) = pending.pop_front() else {
            break;
        };
        let resp: OffsetCommitResponse = conn.recv(ApiKey::OffsetCommit, version, corr)?;
        hist.record(sent.elapsed());
        check_commit(&resp)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let usage = cpu.stop();
    let commits = hist.count();
    Ok(CommitsReport {
        commits,
        partitions_per_commit: a.partitions,
        in_flight: a.in_flight,
        seconds,
        commits_per_s: commits as f64 / seconds,
        offsets_per_s: (commits * a.partitions as u64) as f64 / seconds,
        latency_p50_ms: hist.percentile_ms(50.0),
        latency_p99_ms: hist.percentile_ms(99.0),
        latency_p999_ms: hist.percentile_ms(99.9),
        latency_max_ms: hist.max_us() as f64 / 1e3,
        broker_cpu_us_per_commit: usage.broker_cpu_us_per_request(commits),
        log_flush_policy,
        offsets_topic_flush_policy,
        group,
    })
}
