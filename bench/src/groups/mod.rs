//! `bench groups`: the classic group coordinator under load, over plain Kafka requests.
//!
//! * `stabilize`: N members, each on its own connection, join one new group (JoinGroup v5+,
//!   retrying once with the member id handed out by MEMBER_ID_REQUIRED, KIP-394) and sync
//!   (the leader sends every member an empty assignment). Members that were answered keep
//!   heartbeating and rejoin when told REBALANCE_IN_PROGRESS, as consumers do. The figure is
//!   the wall time from the first JoinGroup to the SyncGroup answer that completes the first
//!   generation in which every member got its assignment, and that generation's number.
//!   The broker's `group.initial.rebalance.delay.ms` (Kafka's default 3000) is part of it.
//! * `commits`: OffsetCommit requests of P partitions each to one group (so one coordinator
//!   shard), generation -1 and no member ("simple" commits to an Empty group), a few in
//!   flight on one connection: commits/s and the latency of each commit.
//! * `memory`: creates G groups (one member joins and syncs, commits one offset, then leaves
//!   unless `--stay`) and reports the broker's resident memory before and after.
//!
//! Only standard protocol behaviour is used, so every mode runs against any Kafka broker.

mod args;
mod commits;
mod member;
mod memory;
mod protocol;
mod stabilize;
#[cfg(test)]
mod tests;

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

pub use self::args::{CommitsArgs, CommonArgs, GroupsArgs, GroupsMode, MemoryArgs, StabilizeArgs};
pub use self::commits::{run_commits, CommitsReport};
pub use self::memory::{rss_bytes, run_memory, status_kb, MemoryReport};
pub use self::protocol::find_coordinator;
pub use self::stabilize::{run_stabilize, StabilizeReport};
use crate::perf::output::write_json;

const CLIENT_ID: &str = "bench-groups";
const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL_NAME: &str = "range";
/// The topic every member subscribes to (only named in the subscription metadata).
const SUBSCRIBED_TOPIC: &str = "bench-groups";
/// Connect and plain-request timeout.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// A JoinGroup or SyncGroup may wait this much longer than the rebalance timeout.
const WAIT_SLACK: Duration = Duration::from_secs(15);
/// Retries of a retriable coordinator error (loading, not available) per request.
const MAX_COORDINATOR_RETRIES: u32 = 200;
const COORDINATOR_BACKOFF: Duration = Duration::from_millis(50);
/// JoinGroup requests one member may send before the run is declared stuck.
const MAX_JOINS_PER_MEMBER: u64 = 10_000;
/// Kafka's broker config resource type (DescribeConfigs).
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_TOPIC: i8 = 2;
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Broker keys read for the reports (Kafka's name; ours for the flush policy).
const INITIAL_DELAY_KEY: &str = "group.initial.rebalance.delay.ms";
const FLUSH_POLICY_KEY: &str = "log.flush.policy";
const TOPIC_FLUSH_POLICY_KEY: &str = "flush.policy";

pub fn run(args: &GroupsArgs) -> Result<()> {
    match &args.mode {
        GroupsMode::Stabilize(a) => {
            let report = run_stabilize(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
        GroupsMode::Commits(a) => {
            let report = run_commits(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
        GroupsMode::Memory(a) => {
            let report = run_memory(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
    }
}

fn write_report<T: Serialize>(common: &CommonArgs, report: &T) -> Result<()> {
    match &common.json {
        Some(path) => write_json(path, report),
        None => Ok(()),
    }
}

fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}
