//! `bench groups`' flags: the mode and what each mode runs.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct GroupsArgs {
    #[command(subcommand)]
    pub mode: GroupsMode,
}

#[derive(Subcommand, Debug)]
pub enum GroupsMode {
    /// Time for a new classic group of N members to reach a generation every member synced.
    Stabilize(StabilizeArgs),
    /// OffsetCommit requests per second to one group (one coordinator), and their latency.
    Commits(CommitsArgs),
    /// Broker resident memory per group, for N groups of one member.
    Memory(MemoryArgs),
}

/// Options of every mode.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap_server: String,
    /// Group id (a prefix in `memory`); default: unique per run.
    #[arg(long)]
    pub group: Option<String>,
    /// Writes the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct StabilizeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 50)]
    pub members: usize,
    #[arg(long, default_value_t = 45_000)]
    pub session_timeout_ms: i32,
    #[arg(long, default_value_t = 60_000)]
    pub rebalance_timeout_ms: i32,
    /// How often a synced member heartbeats (how soon it learns of the next rebalance).
    #[arg(long, default_value_t = 100)]
    pub heartbeat_interval_ms: u64,
    /// Reads the broker's group.initial.rebalance.delay.ms (DescribeConfigs) and reports
    /// the time without it too; fails when the broker does not tell it.
    #[arg(long)]
    pub initial_delay_aware: bool,
    /// Member i sends its first JoinGroup i x this many ms after the first member (0: all
    /// at once). Members arriving one by one rebalance the group more often.
    #[arg(long, default_value_t = 0)]
    pub join_interval_ms: u64,
    /// Gives up after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_s: u64,
}

#[derive(Args, Debug, Clone)]
pub struct CommitsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Partitions per OffsetCommit request (the topic is created with this many).
    #[arg(long, default_value_t = 16)]
    pub partitions: i32,
    /// OffsetCommit requests in flight on the connection.
    #[arg(long, default_value_t = 4)]
    pub in_flight: usize,
    #[arg(long, default_value = "bench-commits")]
    pub topic: String,
    /// The broker's pid (else the process listening on the coordinator's port).
    #[arg(long)]
    pub pid: Option<u32>,
}

#[derive(Args, Debug, Clone)]
pub struct MemoryArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 10_000)]
    pub groups: usize,
    /// Members stay in their groups (Stable groups) instead of leaving (Empty groups with
    /// one committed offset).
    #[arg(long)]
    pub stay: bool,
    /// Threads creating groups, each with its own connection.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Session timeout of the members (with --stay they must outlive the measurement; they
    /// do not heartbeat).
    #[arg(long, default_value_t = 600_000)]
    pub session_timeout_ms: i32,
    #[arg(long, default_value = "bench-memory")]
    pub topic: String,
    /// The broker's pid (else the process listening on the bootstrap port).
    #[arg(long)]
    pub pid: Option<u32>,
}
