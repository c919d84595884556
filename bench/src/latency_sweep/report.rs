//! What `bench latency-sweep` reports: the targets, their idle CPU and one row per point.

use serde::{Deserialize, Serialize};

use super::SweepMode;
use crate::engine::ClientKind;

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
