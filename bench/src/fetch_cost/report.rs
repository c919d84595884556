//! What `bench fetch-cost` measured: per path, per round, the limits of the same run and the
//! targets checked on them; and how a path's rounds become its row.

use serde::Serialize;

use super::PathKind;

/// One path's figures (medians over the rounds), or why it was not measured.
#[derive(Debug, Clone, Serialize)]
pub struct PathResult {
    pub path: PathKind,
    pub label: String,
    /// None: skipped or failed, see `note`.
    pub broker_cpu_s_per_gib: Option<f64>,
    pub mib_per_sec: Option<f64>,
    pub client_cpu_s_per_gib: Option<f64>,
    /// Broker cores busy on average over the consume window.
    pub broker_cores: Option<f64>,
    pub cpu_ratio: Option<f64>,
    pub throughput_ratio: Option<f64>,
    /// Negotiated TLS version and suite.
    pub tls: Option<String>,
    /// The broker's own fetch-path byte counters over its run (see
    /// [`fetch_path_counters`]), when it logs them.
    pub broker_fetch_path: Option<String>,
    pub rounds: Vec<Round>,
    /// What was measured instead, or why nothing was.
    pub note: String,
    /// True when the path was not measured (skipped or failed).
    pub skipped: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub bytes: u64,
    pub records: u64,
    pub elapsed_s: f64,
    pub mib_per_sec: f64,
    pub broker_cpu_s: Option<f64>,
    pub broker_cpu_s_per_gib: Option<f64>,
    pub client_cpu_s_per_gib: Option<f64>,
}

/// The limits measured in the same run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunLimits {
    pub sendfile_mib_s: f64,
    pub sendfile_cpu_s_per_gib: f64,
    pub tcp_loopback_mib_s: f64,
    pub tcp_send_cpu_s_per_gib: f64,
    pub tcp_recv_cpu_s_per_gib: f64,
    pub ring_aes128gcm_cpu_s_per_gib: f64,
    pub ring_aes128gcm_mib_s: f64,
    pub openssl_aes128gcm_mib_s: Option<f64>,
    pub rustcrypto_aes128gcm_cpu_s_per_gib: f64,
    pub rustcrypto_aes128gcm_mib_s: f64,
}

/// A target of the issue, checked on this run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    /// The bound, spelled out with its figures.
    pub bound: String,
    pub measured: String,
    /// None: not measured (see `measured`).
    pub met: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FetchCostReport {
    pub bytes: u64,
    pub record_size: usize,
    pub partitions: i32,
    pub rounds: u32,
    pub broker: String,
    pub paths: Vec<PathResult>,
    pub limits: RunLimits,
    pub targets: Vec<Target>,
    pub ktls: String,
    pub machine: String,
    pub date: String,
}

pub(super) fn median_of(rounds: &[Round], f: impl Fn(&Round) -> Option<f64>) -> Option<f64> {
    crate::compare::median(rounds.iter().map(f))
}

pub(super) fn skipped(path: PathKind, why: String) -> PathResult {
    eprintln!("fetch-cost: {}: skipped: {why}", path.label());
    PathResult {
        path,
        label: path.label().to_string(),
        broker_cpu_s_per_gib: None,
        mib_per_sec: None,
        client_cpu_s_per_gib: None,
        broker_cores: None,
        cpu_ratio: None,
        throughput_ratio: None,
        tls: None,
        broker_fetch_path: None,
        rounds: Vec::new(),
        note: why,
        skipped: true,
    }
}

pub(super) fn measured(
    path: PathKind,
    label: String,
    rounds: Vec<Round>,
    note: String,
) -> PathResult {
    let cores = median_of(&rounds, |r| {
        r.broker_cpu_s.map(|s| s / r.elapsed_s.max(1e-9))
    });
    PathResult {
        path,
        label,
        broker_cpu_s_per_gib: median_of(&rounds, |r| r.broker_cpu_s_per_gib),
        mib_per_sec: median_of(&rounds, |r| Some(r.mib_per_sec)),
        client_cpu_s_per_gib: median_of(&rounds, |r| r.client_cpu_s_per_gib),
        broker_cores: cores,
        cpu_ratio: None,
        throughput_ratio: None,
        tls: None,
        broker_fetch_path: None,
        rounds,
        note,
        skipped: false,
    }
}
